"""The NATS bus wrapper: bounded connect, typed publish/request/subscribe, JetStream events."""

from shared.bus.bus import Bus
from shared.bus.errors import BusError, ConnectFailed, NoResponders, RemoteError, RequestLost, RequestTimeout
from shared.bus.incoming import BatchHandler, Handler, Incoming
from shared.bus.lost_requests import IfLost

__all__ = ["BatchHandler", "Bus", "BusError", "ConnectFailed", "Handler", "IfLost", "Incoming", "NoResponders",
           "RemoteError", "RequestLost", "RequestTimeout"]
