"""The NATS bus wrapper: bounded connect, typed publish/request/subscribe, JetStream events."""

from shared.bus.bus import Bus
from shared.bus.errors import BusError, ConnectFailed, NoResponders, RemoteError, RequestTimeout
from shared.bus.incoming import BatchHandler, Handler, Incoming

__all__ = ["BatchHandler", "Bus", "BusError", "ConnectFailed", "Handler", "Incoming", "NoResponders",
           "RemoteError", "RequestTimeout"]
