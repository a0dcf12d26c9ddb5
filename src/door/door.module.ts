import { Global, Module } from '@nestjs/common';
import { LESSONS_CONFIG, LessonsConfig } from '../settings/lessons.config';
import { AdminGuard } from './admin.guard';
import { DoorRefusals } from './door-refusals';
import { PaymentGuard } from './payment-signature';
import { WaitingRoom } from './waiting-room';
import { WaitingRoomController } from './waiting-room.controller';

/**
 * door/: what stands in front of the purchase: the refusals answered before routing, the
 * waiting room and its passes, and who may use the admin routes and confirm a payment.
 */
@Global()
@Module({
  controllers: [WaitingRoomController],
  providers: [
    WaitingRoom,
    AdminGuard,
    PaymentGuard,
    {
      provide: DoorRefusals,
      inject: [LESSONS_CONFIG.token],
      // FAULT_CLOCK_SKEW_MS: a clock that runs ahead, as a test's app has (0 everywhere else).
      useFactory: (config: LessonsConfig) =>
        new DoorRefusals(config.faultClockSkewMs === 0 ? Date.now : () => Date.now() + config.faultClockSkewMs),
    },
  ],
  exports: [WaitingRoom, DoorRefusals, AdminGuard, PaymentGuard],
})
export class DoorModule {}
