import { Global, Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.constants';
import { DoorRefusals } from './door-refusals';
import { WaitingRoom } from './waiting-room';
import { WaitingRoomController } from './waiting-room.controller';

/** door/: what stands in front of the purchase: the refusals answered before routing, the waiting room and its passes. */
@Global()
@Module({
  controllers: [WaitingRoomController],
  providers: [
    WaitingRoom,
    {
      provide: DoorRefusals,
      inject: [APP_CONFIG],
      // FAULT_CLOCK_SKEW_MS: a clock that runs ahead, as a test's app has (0 everywhere else).
      useFactory: (config: AppConfig) =>
        new DoorRefusals(config.faultClockSkewMs === 0 ? Date.now : () => Date.now() + config.faultClockSkewMs),
    },
  ],
  exports: [WaitingRoom, DoorRefusals],
})
export class DoorModule {}
