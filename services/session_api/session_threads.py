"""A session's threads as the API admits a call's thread and parent (issue 13: ids cannot reset service).

A call on a session names its thread (`X-Thread-Id` / `thread_id`, default `main`) and, on a
thread's first call, maybe a parent. When the call is admitted the API knows the session's
threads: those in the process table's lookup reply (`SessionInfo.thread_service_s`: threads with
a completed call) and those this API process has placed calls on since (not in the table yet).
- A new thread whose parent is neither one of them nor `main` is a 400 `unknown_parent_thread`:
  the client names a fork point the program does not have (the ledger would fork it from S_p).
- A new thread beyond `MAX_THREADS_PER_SESSION` (default 256) is a 400 `too_many_threads`: a
  session's lookup reply lists every thread, and each one is a thread row at the table.
Threads placed through another API worker are told here by that worker (peer_notes.py), well
before their first call is answered; a note lost on the way means a fork from that thread is
refused until its call completes (retry then). Calls without
a session are one-call programs: nothing to check.
"""

from __future__ import annotations

from collections.abc import Collection

from services.session_api.errors import ApiError
from shared.core.program import ROOT_THREAD
from shared.lru import LRU

MAX_REMEMBERED_SESSIONS = 10_000  # sessions whose placed threads are remembered (LRU)


def _refused(message: str, code: str, param: str) -> ApiError:
    return ApiError(400, message, "invalid_request_error", code, param, headers={"x-should-retry": "false"})


class SessionThreads:
    def __init__(self, max_threads: int, max_sessions: int = MAX_REMEMBERED_SESSIONS) -> None:
        self.max_threads = max_threads
        self.max_sessions = max_sessions
        self._placed: LRU[str, set[str]] = LRU(max_sessions)  # program id -> threads placed here

    def admit(self, program_id: str, in_table: Collection[str], thread_id: str, parent: str | None,
              shown_as: str) -> None:
        """Refuse the call (400) or remember its thread as one of the session's."""
        placed = self._placed.touch(program_id)
        if placed is None:
            placed = set()
            self._placed.put(program_id, placed)
        if thread_id in in_table or thread_id in placed:
            return  # a known thread: its parent mattered only at its first call
        if parent is not None and parent != ROOT_THREAD and parent not in in_table and parent not in placed:
            raise _refused(f"parent_thread_id {parent!r} is not a thread of session {shown_as!r}; fork from "
                           f"'{ROOT_THREAD}' or from a thread that has had a call", "unknown_parent_thread",
                           "parent_thread_id")
        num_threads = len(placed.union(in_table))
        if num_threads >= self.max_threads:
            raise _refused(f"session {shown_as!r} has {num_threads} threads, the limit is {self.max_threads} "
                           "(MAX_THREADS_PER_SESSION); send this call on one of them", "too_many_threads",
                           "thread_id")
        placed.add(thread_id)

    def knows(self, program_id: str, thread_id: str) -> bool:
        placed = self._placed.get(program_id)
        return placed is not None and thread_id in placed

    def note(self, program_id: str, thread_id: str) -> None:
        """A thread placed through another API worker (peer_notes.py): one of the session's now."""
        placed = self._placed.touch(program_id)
        if placed is None:
            placed = set()
            self._placed.put(program_id, placed)
        if len(placed) < self.max_threads:
            placed.add(thread_id)

    def forget(self, program_id: str) -> None:
        self._placed.pop(program_id, None)
