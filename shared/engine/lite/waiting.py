"""The waiting queue: a heap ordered by priority key, with lazy deletion and per-program index.

Keys change only when the program ledger does (a completion or a promotion), so the queue re-keys
programs, not the whole queue, and never re-sorts when nothing changed.
"""

from __future__ import annotations

import heapq

from shared.engine.lite.sequence import Seq


class WaitingQueue:
    def __init__(self) -> None:
        self._heap: list[tuple] = []
        self.members: dict[str, Seq] = {}
        self.by_program: dict[str, dict[str, Seq]] = {}

    def __len__(self) -> int:
        return len(self.members)

    def push(self, seq: Seq, key: tuple) -> None:
        """Add a call, or re-key one already queued."""
        seq.key = key
        seq.queue_ver += 1
        if seq.call_id not in self.members:
            self.members[seq.call_id] = seq
            self.by_program.setdefault(seq.program_id, {})[seq.call_id] = seq
        heapq.heappush(self._heap, (key, seq.order, seq.queue_ver, seq))
        if len(self._heap) > 2 * len(self.members) + 64:
            self._compact()

    def rekey_all(self, key_of) -> None:
        """Re-key every queued call and rebuild the heap (keys may change shape: no stale entry
        of the old shape may stay to be compared with a new one)."""
        heap = []
        for seq in self.members.values():
            seq.key = key_of(seq)
            seq.queue_ver += 1
            heap.append((seq.key, seq.order, seq.queue_ver, seq))
        heapq.heapify(heap)
        self._heap = heap

    def remove(self, seq: Seq) -> None:
        del self.members[seq.call_id]
        group = self.by_program[seq.program_id]
        del group[seq.call_id]
        if not group:
            del self.by_program[seq.program_id]
        seq.queue_ver += 1  # its heap entries are stale now

    def peek(self) -> Seq | None:
        heap = self._heap
        while heap:
            _, _, ver, seq = heap[0]
            if ver == seq.queue_ver and seq.call_id in self.members:
                return seq
            heapq.heappop(heap)
        return None

    def best(self, k: int) -> list[Seq]:
        """The k best queued calls in key order (small k)."""
        out: list[Seq] = []
        for _, _, ver, seq in heapq.nsmallest(k + (len(self._heap) - len(self.members)), self._heap):
            if ver == seq.queue_ver and seq.call_id in self.members:
                out.append(seq)
                if len(out) == k:
                    break
        return out

    def _compact(self) -> None:
        self._heap = [e for e in self._heap if e[2] == e[3].queue_ver and e[3].call_id in self.members]
        heapq.heapify(self._heap)
