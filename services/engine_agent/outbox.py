"""The completion outbox: an append-only file of the `CallCompleted`s JetStream has not acked yet,
so a completion made before the agent is killed reaches the process table when an agent with the
same id starts again on the same disk (it replays the file).

One file per engine id and NATS deployment (`<id>-<digest of the NATS URLs>.outbox` under
ENGINE_OUTBOX_DIR), held with an exclusive lock on a `.lock` beside it for the agent's life (a
second agent on the same file refuses to start). Records, one a line:

    C {"call_id": ..., ...}     a completion (msgspec JSON of `CallCompleted`), written before the
                                answer's last chunk leaves, so a client never has an answer whose
                                completion exists only in memory
    A "call-id"                 JetStream acked that call's completion

A write is one `os.write` on an O_APPEND descriptor: it is in the kernel once it returns, so a
SIGKILL right after keeps it (not fsynced: a power loss of the host may lose the tail). A torn last
line (no newline) is skipped at replay. The file is rewritten with only the unacked completions
(write a temporary file, rename it over) once it holds many more records than are pending, and
removed at a clean stop with nothing pending. Bounded: at `max_entries` unacked completions a new
one is not written (`append` answers False; the publisher logs it and still retries from memory).
Replaying is safe: the process table inserts calls ON CONFLICT (call_id) DO NOTHING, so a completion
stored twice counts once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import msgspec

from shared.protocol import messages as m

DEFAULT_MAX_ENTRIES = 50_000  # about 20 MB of file and memory at ~400 bytes a completion
COMPACT_MIN_RECORDS = 4096  # rewrite no sooner: a rewrite costs one pass over what is pending
_DECODER = msgspec.json.Decoder(m.CallCompleted)


class OutboxInUse(RuntimeError):
    """Another live agent holds this outbox (same engine id, same NATS, same disk)."""


def default_dir() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "autellix" / "engine-outbox"


def outbox_path(folder: Path, engine_id: str, nats_url: str) -> Path:
    """Keyed by the NATS deployment too: two stacks on one host with the default id never share a file."""
    servers = sorted(f"{parts.hostname}:{parts.port or 4222}"  # no credentials: a new password, same file
                     for parts in (urlsplit(u.strip()) for u in nats_url.split(",") if u.strip()))
    digest = hashlib.sha256(",".join(servers).encode()).hexdigest()[:12]
    return folder / f"{engine_id}-{digest}.outbox"


@dataclass
class Replay:
    """What `CompletionOutbox.open` found in an existing file."""

    pending: list[m.CallCompleted] = field(default_factory=list)
    torn_tail: bool = False  # the last line had no newline (written when the process died)
    bad_lines: int = 0  # lines that did not decode (skipped; logged by the caller)


class CompletionOutbox:
    def __init__(self, path: Path, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if max_entries < 1:
            raise ValueError(f"the outbox must hold at least one completion, not {max_entries}")
        self.path = path
        self.max_entries = max_entries
        self._pending: dict[str, bytes] = {}  # call id -> its C line, in append order
        self._records = 0  # lines in the file now
        self._fd = -1
        self._lock_fd = -1

    @classmethod
    def open(cls, path: Path, max_entries: int = DEFAULT_MAX_ENTRIES) -> tuple[CompletionOutbox, Replay]:
        """Lock, read what a previous agent left (its unacked completions), rewrite the file with
        those alone, and open it for appending."""
        outbox = cls(path, max_entries)
        path.parent.mkdir(parents=True, exist_ok=True)
        outbox._lock_fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(outbox._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(outbox._lock_fd)
            raise OutboxInUse(f"the completion outbox {path} is held by another live engine agent with the same "
                              "id on this host; give each agent its own ENGINE_ID (or ENGINE_OUTBOX_DIR)") from None
        replay = outbox._load()
        outbox._rewrite()
        return outbox, replay

    def _load(self) -> Replay:
        replay = Replay()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return replay
        lines = data.split(b"\n")
        if lines[-1]:
            replay.torn_tail = True  # the last write was cut short: its completion was never sent
        found: dict[str, m.CallCompleted] = {}
        for line in lines[:-1]:
            try:
                if line.startswith(b"C "):
                    event = _DECODER.decode(line[2:])
                    found[event.call_id] = event
                    self._pending[event.call_id] = line + b"\n"
                elif line.startswith(b"A "):
                    call_id = msgspec.json.decode(line[2:], type=str)
                    found.pop(call_id, None)
                    self._pending.pop(call_id, None)
                elif line:
                    raise ValueError("unknown record")
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
                replay.bad_lines += 1
        replay.pending = list(found.values())
        return replay

    def _rewrite(self) -> None:
        """The file with only the pending completions, swapped in by a rename (atomic: a kill
        during it leaves the old file or the new one, never half of one)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as out:
            out.write(b"".join(self._pending.values()))
        os.replace(tmp, self.path)
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._records = len(self._pending)

    @property
    def num_pending(self) -> int:
        return len(self._pending)

    def is_pending(self, call_id: str) -> bool:
        return call_id in self._pending

    def append(self, event: m.CallCompleted) -> bool:
        """Write the completion; False (nothing written) when `max_entries` are pending."""
        if event.call_id in self._pending:
            return True
        if len(self._pending) >= self.max_entries:
            return False
        line = b"C " + msgspec.json.encode(event) + b"\n"
        self._write(line)
        self._pending[event.call_id] = line
        return True

    def ack(self, call_id: str) -> None:
        """JetStream has the completion: mark it, and rewrite once acked records dominate the file."""
        if self._pending.pop(call_id, None) is None:
            return
        self._write(b"A " + msgspec.json.encode(call_id) + b"\n")
        if self._records >= COMPACT_MIN_RECORDS and self._records > 4 * len(self._pending):
            self._rewrite()

    def _write(self, line: bytes) -> None:
        written = os.write(self._fd, line)
        if written != len(line):  # a regular file writes all or raises (ENOSPC); never half silently
            raise OSError(f"short write to the completion outbox {self.path} ({written} of {len(line)} bytes)")
        self._records += 1

    def close(self) -> None:
        """Release the file; removed when nothing is pending (a clean stop leaves no file behind)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            if not self._pending:
                self.path.unlink(missing_ok=True)
                # while still locked: a starting agent then either failed to lock, or locks a new file
                Path(f"{self.path}.lock").unlink(missing_ok=True)
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = -1
