"""vLLM's waiting queue ordered by Autellix's policy key (used by ProgramAwareScheduler).

One of the modules that import vLLM.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator

from vllm.v1.core.sched.request_queue import RequestQueue
from vllm.v1.request import Request


class KeyedRequestQueue(RequestQueue):
    """vLLM's priority heap, ordered by our policy key instead of (priority, arrival_time).

    Entries are removed lazily (a tombstone set), so a key change is remove + re-add in O(log n).
    """

    def __init__(self, key_of: Callable[[Request], tuple]) -> None:
        self._key_of = key_of
        self._heap: list[tuple[tuple, int, Request]] = []
        self._live: dict[int, int] = {}  # id(request) -> entry serial of its live entry
        self._serial = 0

    def add_request(self, request: Request) -> None:
        self._serial += 1
        self._live[id(request)] = self._serial
        heapq.heappush(self._heap, (self._key_of(request), self._serial, request))

    def _prune(self) -> None:
        heap = self._heap
        while heap and self._live.get(id(heap[0][2])) != heap[0][1]:
            heapq.heappop(heap)

    def pop_request(self) -> Request:
        self._prune()
        if not self._heap:
            raise IndexError("pop from an empty queue")
        _, _, request = heapq.heappop(self._heap)
        del self._live[id(request)]
        return request

    def peek_request(self) -> Request:
        self._prune()
        if not self._heap:
            raise IndexError("peek from an empty queue")
        return self._heap[0][2]

    def prepend_request(self, request: Request) -> None:
        self.add_request(request)  # a keyed queue has no front: the key decides

    def prepend_requests(self, requests: Iterable[Request]) -> None:
        for request in requests:
            self.add_request(request)

    def remove_request(self, request: Request) -> None:
        if self._live.pop(id(request), None) is None:
            raise ValueError(f"request {request.request_id} is not in the queue")
        if len(self._heap) > 2 * len(self._live) + 64:  # compact when tombstones dominate
            self._heap = [e for e in self._heap if self._live.get(id(e[2])) == e[1]]
            heapq.heapify(self._heap)

    def remove_requests(self, requests: Iterable[Request]) -> None:
        for request in requests:
            if id(request) in self._live:
                self.remove_request(request)

    def contains(self, request: Request) -> bool:
        return id(request) in self._live

    def unordered(self) -> Iterator[Request]:
        return (e[2] for e in self._heap if self._live.get(id(e[2])) == e[1])

    def smallest(self, n: int) -> list[Request]:
        return [e[2] for e in heapq.nsmallest(n, (e for e in self._heap if self._live.get(id(e[2])) == e[1]))]

    def __bool__(self) -> bool:
        return bool(self._live)

    def __len__(self) -> int:
        return len(self._live)

    def __getitem__(self, index: int) -> Request:
        """The index-th request in key order (vLLM's FCFS queue is indexable; callers may index)."""
        return list(self)[index]

    def __iter__(self) -> Iterator[Request]:
        return iter([e[2] for e in sorted(e for e in self._heap if self._live.get(id(e[2])) == e[1])])


