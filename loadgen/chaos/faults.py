"""The faults chaos injects, one function each; each returns after the stack is whole again.

- engine: SIGKILL one engine agent (alternating), start a new one with the same id after `down_s`;
  its in-flight calls are re-dispatched by the API (recovery.py) or fail retryably.
- process_table: SIGKILL it mid-batch, start it again; unacked completions come back from the
  durable consumer and are applied once (idempotent by call id).
- nats: stop the server and start it on the same port and JetStream store; every client reconnects.
- postgres: fast shutdown and restart on the same data dir; the process table retries until it commits.
- table_commit_crash: the process table dies right after committing a batch, before publishing its
  updates or acking (FAULT_EXIT_AFTER_COMMITS=1); the next table gets the batch again, finds it
  stored, and publishes the committed service (republish.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from loadgen.chaos.stack import ChaosStack

FAULT_KINDS = ("engine", "process_table", "nats", "postgres", "table_commit_crash")
CRASH_AFTER_COMMIT = "FAULT_EXIT_AFTER_COMMITS"
CRASH_WAIT_S = 30.0  # the load commits a batch well within this


@dataclass
class FaultRecord:
    kind: str
    target: str
    at_s: float  # since the run started
    recovered_s: float  # from injection until the stack answered again


async def inject(stack: ChaosStack, kind: str, index: int, down_s: float, t0: float) -> FaultRecord:
    start = time.monotonic()
    if kind == "engine":
        engines = stack.names("engine_agent-")
        target = engines[index % len(engines)]
        stack.kill(target)
        await asyncio.sleep(down_s)
        stack.restart(target)
    elif kind == "process_table":
        target = "process_table"
        stack.kill(target)
        await asyncio.sleep(down_s)
        stack.restart(target)
    elif kind == "table_commit_crash":
        target = "process_table"
        stack.restart(target, set_env={CRASH_AFTER_COMMIT: "1"})
        deadline = time.monotonic() + CRASH_WAIT_S
        while stack.process(target).alive():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the process table committed nothing in {CRASH_WAIT_S:.0f} s (is there load?)")
            await asyncio.sleep(0.05)
        await asyncio.sleep(down_s)
        stack.restart(target, drop_env=(CRASH_AFTER_COMMIT,))
    elif kind == "nats":
        target = "nats-server"
        await asyncio.to_thread(stack.restart_nats, down_s)
    elif kind == "postgres":
        target = "postgresql"
        await asyncio.to_thread(stack.restart_postgres, down_s)
    else:
        raise ValueError(f"unknown fault {kind!r}; known: {', '.join(FAULT_KINDS)}")
    await stack.wait_ready()
    return FaultRecord(kind, target, round(start - t0, 2), round(time.monotonic() - start, 2))


def parse_kinds(spec: str) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in spec.split(",") if k.strip())
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown or not kinds:
        raise ValueError(f"--faults takes a comma list of {', '.join(FAULT_KINDS)}; got {spec!r}")
    return kinds
