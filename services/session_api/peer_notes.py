"""What one API worker learns that the others' caches need: with several workers
(`autellix up --api-workers N`) a session's calls land on any of them.

Three per-process caches learn from the other workers through one broadcast subject (core NATS,
every worker subscribes, no queue group):
- the output index (tokens.py): which call produced an assistant text, so a follow-up call on
  another worker names that KV segment as the engine stored it (a miss costs a prefix-cache hit);
- completed-call counts (call_counts.py): the ATLAS base's freshness check sees calls answered
  elsewhere (a count too low only makes the engine trust its own view);
- placed threads (session_threads.py): a fork from a thread just placed through another worker
  is admitted, not refused as an unknown parent.
A session's close is not a note: the process table announces every close to every worker
(session_closes.py), including those of another worker and its idle expiry.
Notes made in one turn of the event loop travel as one message. Delivery is at most once and
a few hundred microseconds late; each of these caches only gets less exact from a lost note,
never wrong.
"""

from __future__ import annotations

import asyncio

from services.session_api.call_counts import SessionCallCounts
from services.session_api.session_threads import SessionThreads
from services.session_api.tokens import OutputIndex, content_segment_id
from shared.bus.bus import Bus
from shared.bus.incoming import Incoming
from shared.core.program import ROOT_THREAD
from shared.logging import get_logger
from shared.protocol import messages as m
from shared.protocol import subjects

MAX_NOTES = 4096  # of each kind in one message; a busier turn sends more messages
MAX_ID_CHARS = 1024
KINDS = ("outputs", "completed", "threads")  # closes are not notes: every worker hears the table's

log = get_logger()


class PeerNotes:
    def __init__(self, bus: Bus, max_threads_per_session: int) -> None:
        self.bus = bus
        self.worker_id = bus.publisher_id
        self.outputs = _SharedOutputIndex(self)
        self.completed_calls = _SharedCallCounts(self)
        self.session_threads = _SharedSessionThreads(self, max_threads_per_session)
        self._out = m.ApiPeerNotes(worker_id=self.worker_id)
        self._flush_scheduled = False
        self._tasks: set[asyncio.Task] = set()
        self.num_applied = 0  # notes taken from other workers (tests, metrics)

    async def start(self) -> PeerNotes:
        await self.bus.subscribe(subjects.api_peer_notes(), self._on_notes, types=(m.ApiPeerNotes,))
        return self

    # --- out --------------------------------------------------------------------------------
    def note(self, kind: str, item) -> None:
        getattr(self._out, kind).append(item)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, m.ApiPeerNotes(worker_id=self.worker_id)
        while out.outputs or out.completed or out.threads:
            part = m.ApiPeerNotes(worker_id=self.worker_id, **{
                kind: getattr(out, kind)[:MAX_NOTES] for kind in KINDS})
            for kind in KINDS:
                del getattr(out, kind)[:MAX_NOTES]
            task = asyncio.ensure_future(self._publish(part))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _publish(self, notes: m.ApiPeerNotes) -> None:
        try:
            await self.bus.publish(subjects.api_peer_notes(), notes)
        except Exception as exc:  # the others' caches are only less exact for it
            log.warning("peer_notes_not_sent", error=str(exc))

    # --- in ---------------------------------------------------------------------------------
    async def _on_notes(self, incoming: Incoming) -> None:
        notes = incoming.body
        if notes.worker_id == self.worker_id:
            return  # our own, echoed
        if not _well_formed(notes):
            log.warning("peer_notes_rejected", worker_id=notes.worker_id[:64])
            return
        for segment_id, call_id in notes.outputs:
            OutputIndex.remember_segment(self.outputs, segment_id, call_id)
        for program_id in notes.completed:
            SessionCallCounts.completed(self.completed_calls, program_id)
        for program_id, thread_id in notes.threads:
            self.session_threads.note(program_id, thread_id)
        self.num_applied += len(notes.outputs) + len(notes.completed) + len(notes.threads)


def _well_formed(notes: m.ApiPeerNotes) -> bool:
    def ok(value) -> bool:
        return isinstance(value, str) and 0 < len(value) <= MAX_ID_CHARS

    pairs = (*notes.outputs, *notes.threads)
    return (all(len(x) <= MAX_NOTES for x in (notes.outputs, notes.completed, notes.threads))
            and all(ok(p) for p in notes.completed)
            and all(isinstance(p, (list, tuple)) and len(p) == 2 and ok(p[0]) and ok(p[1]) for p in pairs))


class _SharedOutputIndex(OutputIndex):
    def __init__(self, notes: PeerNotes) -> None:
        super().__init__()
        self._notes = notes

    def remember(self, response_text: str, call_id: str, salt: str = "") -> None:
        segment_id = content_segment_id("assistant", response_text, salt)
        self.remember_segment(segment_id, call_id)
        self._notes.note("outputs", (segment_id, call_id))


class _SharedCallCounts(SessionCallCounts):
    def __init__(self, notes: PeerNotes) -> None:
        super().__init__()
        self._notes = notes

    def completed(self, program_id: str) -> None:
        before = self.get(program_id)
        super().completed(program_id)
        if before is not None:  # a one-call program has no count to share
            self._notes.note("completed", program_id)


class _SharedSessionThreads(SessionThreads):
    def __init__(self, notes: PeerNotes, max_threads: int) -> None:
        super().__init__(max_threads)
        self._notes = notes

    def admit(self, program_id: str, in_table, thread_id: str, parent: str | None, shown_as: str) -> None:
        new = thread_id != ROOT_THREAD and thread_id not in in_table and not self.knows(program_id, thread_id)
        super().admit(program_id, in_table, thread_id, parent, shown_as)
        if new:
            self._notes.note("threads", (program_id, thread_id))
