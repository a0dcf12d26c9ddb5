import { Global, Module } from '@nestjs/common';
import { WaitingRoom } from './waiting-room';
import { WaitingRoomController } from './waiting-room.controller';

/** door/: what stands in front of the purchase: the waiting room and its passes. */
@Global()
@Module({ controllers: [WaitingRoomController], providers: [WaitingRoom], exports: [WaitingRoom] })
export class DoorModule {}
