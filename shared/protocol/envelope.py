"""The envelope every message travels in, and per-publisher sequence tracking.

Wire form (one msgpack map, named fields; encoded and decoded by msgspec, in C):
    {"schema_version": 1, "type": "call.completed", "publisher_id": "engine_agent.e0.1234.9f3a",
     "seq": 17, "sent_at_ns": 1700000000000000000, "body": {...the message's fields...}}

`schema_version` changes only on an incompatible change (additive fields never bump it), so a
reader rejects any other version. `seq` counts from 1 per publisher id; a publisher id names one
process incarnation (`make_publisher_id`), so a restart starts a new sequence instead of looking
like duplicates.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

import msgspec

from shared.protocol import messages as _messages  # noqa: F401  (registers every message type)
from shared.protocol.bound_check import bounds_checker
from shared.protocol.codec import MESSAGE_TYPES, protocol_error
from shared.protocol.errors import ProtocolError

SCHEMA_VERSION = 1


# Structs without cycles, out of the collector's sight: built for every message received, at a
# third of a NamedTuple's cost
class Envelope(msgspec.Struct, frozen=True, gc=False):
    schema_version: int
    type: str
    publisher_id: str
    seq: int
    sent_at_ns: int


class Decoded(msgspec.Struct, frozen=True, gc=False):
    envelope: Envelope
    body: Any  # the typed message


def make_publisher_id(service: str) -> str:
    """One id per process incarnation: service, host, pid and a random suffix."""
    return f"{service}.{socket.gethostname()}.{os.getpid()}.{secrets.token_hex(3)}"


class _Outgoing(msgspec.Struct):  # the wire form's field order
    schema_version: int
    type: str
    publisher_id: str
    seq: int
    sent_at_ns: int
    body: Any


class _Incoming(msgspec.Struct):  # the body stays raw bytes until its type is known
    schema_version: int
    type: str
    publisher_id: str
    seq: int
    sent_at_ns: int
    body: msgspec.Raw


_ENCODER = msgspec.msgpack.Encoder()
_ENVELOPE_DECODER = msgspec.msgpack.Decoder(_Incoming)
_ENVELOPE_FIELD_KINDS = {"type": "strings", "publisher_id": "strings"}  # the rest are integers


class _BodyReader(NamedTuple):
    decoder: msgspec.msgpack.Decoder
    check_bounds: Callable[[Any], None]


_BODY_READERS: dict[str, _BodyReader] = {}  # message type name -> its reader, made on first use


def _body_reader(type_name: str) -> _BodyReader:
    reader = _BODY_READERS.get(type_name)
    if reader is None:
        cls = MESSAGE_TYPES.get(type_name)
        if cls is None:
            raise ProtocolError(f"unknown message type {type_name!r}")
        reader = _BODY_READERS[type_name] = _BodyReader(msgspec.msgpack.Decoder(cls), bounds_checker(cls))
    return reader


def encode(msg: Any, publisher_id: str, seq: int, sent_at_ns: int | None = None) -> bytes:
    type_name = getattr(type(msg), "TYPE", None)
    if type_name is None or MESSAGE_TYPES.get(type_name) is not type(msg):
        raise TypeError(f"{type(msg).__name__} is not a registered message type")
    return _ENCODER.encode(_Outgoing(SCHEMA_VERSION, type_name, publisher_id, seq,
                                     time.time_ns() if sent_at_ns is None else sent_at_ns, msg))


def _envelope_error(exc: msgspec.MsgspecError, data: bytes) -> ProtocolError:
    if isinstance(exc, msgspec.ValidationError):  # the typed decoder stops at the first misfit:
        try:  # are these bytes one msgpack value at all? (only on this error path)
            msgspec.msgpack.decode(data)
        except msgspec.DecodeError as not_msgpack:
            exc = not_msgpack
    if not isinstance(exc, msgspec.ValidationError):  # not msgpack at all (truncated, bad opcode...)
        return ProtocolError(f"not a msgpack message ({exc}); {len(data)} bytes")
    text = str(exc)
    if text.startswith("Object missing required field"):
        return ProtocolError("envelope is missing " + text.split("`")[1])
    if "- at `$." not in text:
        return ProtocolError(f"envelope must be a map ({text})")
    name = text.rsplit("- at `$.", 1)[1].rstrip("`")
    if _ENVELOPE_FIELD_KINDS.get(name) == "strings":
        return ProtocolError("envelope type and publisher_id must be strings")
    if name == "schema_version":
        return ProtocolError(f"unsupported schema_version ({text}); this reader speaks {SCHEMA_VERSION}")
    return ProtocolError("envelope seq and sent_at_ns must be non-negative integers")


def decode(data: bytes) -> Decoded:
    """Bytes -> envelope + typed message; anything else raises `ProtocolError` with the reason."""
    try:
        env = _ENVELOPE_DECODER.decode(data)
    except msgspec.MsgspecError as exc:
        raise _envelope_error(exc, data) from None
    if env.schema_version != SCHEMA_VERSION:
        raise ProtocolError(f"unsupported schema_version {env.schema_version!r} (this reader speaks {SCHEMA_VERSION})")
    if env.seq < 0:
        raise ProtocolError("envelope seq and sent_at_ns must be non-negative integers")
    reader = _body_reader(env.type)
    try:
        body = reader.decoder.decode(env.body)
    except msgspec.MsgspecError as exc:
        raise protocol_error(exc, reader.decoder.type.__name__) from None
    reader.check_bounds(body)
    return Decoded(Envelope(SCHEMA_VERSION, env.type, env.publisher_id, env.seq, env.sent_at_ns), body)


class Publisher:
    """Stamps outgoing messages with this publisher's id and next sequence number."""

    def __init__(self, publisher_id: str) -> None:
        self.publisher_id = publisher_id
        self._seq = 0

    @property
    def last_seq(self) -> int:
        return self._seq

    def encode(self, msg: Any) -> bytes:
        self._seq += 1
        return encode(msg, self.publisher_id, self._seq)


class SeqVerdict(StrEnum):
    NEW = "new"  # the next expected number (or the first seen from this publisher)
    GAP = "gap"  # new, but numbers between the last seen and this one are missing
    LATE = "late"  # fills an earlier gap (out-of-order delivery)
    DUPLICATE = "duplicate"  # seen before: drop it


@dataclass(slots=True)
class _PublisherState:
    highest: int
    missing: set[int] = field(default_factory=set)


@dataclass(frozen=True, slots=True)
class SeqObservation:
    verdict: SeqVerdict
    missing: int = 0  # for GAP: how many numbers were skipped


class SequenceTracker:
    """Gap and duplicate detection over (publisher_id, seq) pairs.

    Remembers up to `max_missing` missing numbers per publisher to tell a late arrival from a
    duplicate; beyond that the oldest gaps are forgotten (a very late message then reads as a
    duplicate, which is the safe side for idempotent consumers).
    """

    def __init__(self, max_missing: int = 4096) -> None:
        self._max_missing = max_missing
        self._state: dict[str, _PublisherState] = {}

    def observe(self, publisher_id: str, seq: int) -> SeqObservation:
        st = self._state.get(publisher_id)
        if st is None:
            self._state[publisher_id] = _PublisherState(highest=seq)
            return SeqObservation(SeqVerdict.NEW)
        if seq == st.highest + 1:
            st.highest = seq
            return SeqObservation(SeqVerdict.NEW)
        if seq > st.highest:
            skipped = range(st.highest + 1, seq)
            st.missing.update(skipped[-self._max_missing:])
            if len(st.missing) > self._max_missing:
                for old in sorted(st.missing)[: len(st.missing) - self._max_missing]:
                    st.missing.discard(old)
            st.highest = seq
            return SeqObservation(SeqVerdict.GAP, missing=len(skipped))
        if seq in st.missing:
            st.missing.discard(seq)
            return SeqObservation(SeqVerdict.LATE)
        return SeqObservation(SeqVerdict.DUPLICATE)

    def missing(self, publisher_id: str) -> int:
        st = self._state.get(publisher_id)
        return len(st.missing) if st else 0

    def forget(self, publisher_id: str) -> None:
        self._state.pop(publisher_id, None)
