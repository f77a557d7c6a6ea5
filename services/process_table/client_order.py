"""Fold a program's completions in the order its client made the calls (pure; no I/O).

Completions reach the table in stream order, which is not always the order the client made the
calls in: one re-published after a fault (an engine's retry, a batch redelivered past a crash) can
arrive after the calls that followed it. Folded first, a later call goes wrong in two ways: one
whose engine's view was behind records no ATLAS thread base, so it starts from the thread's service
as it stands (or, its thread not created yet, from the program's S_p: the new-thread rule), and a
fork takes its parent's service as it stands. Either way the thread is charged a call it should
not be, or misses one.

Each call carries how many of the session's calls the API had seen complete when it sent it
(`completed_calls_before`), so per program:
- a batch folds in that order (stable; only when every completion in it says);
- a completion sent after more completions than the table has folded ahead of it is held back
  (the service redelivers it after a short delay) until they are in, or until it has waited long
  enough (`may_wait` False: folded as it is, the bounded worst case, as before). Without faults
  the completions a client saw were published before the call it sent next, so nothing waits.
"""

from __future__ import annotations

from services.process_table.fold import Completion


def in_client_order(calls: list[Completion]) -> list[Completion]:
    """`calls` (one program's, in delivery order) sorted by completed_calls_before, when all carry it."""
    if len(calls) < 2 or any(c.completed_calls_before is None for c in calls):
        return calls
    return sorted(calls, key=lambda c: c.completed_calls_before)


def held_back(folded_before: int, calls: list[Completion]) -> list[Completion]:
    """Of one program's `calls`, in the order they fold after `folded_before` completions already
    folded: those sent after more completions than are folded ahead of them, and allowed to wait."""
    held = []
    folded = folded_before
    for c in calls:
        if c.may_wait and c.completed_calls_before is not None and c.completed_calls_before > folded:
            held.append(c)
        else:
            folded += 1
    return held
