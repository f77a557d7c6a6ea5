"""One real stack of processes for the reliability tests (`autellix up` as the chaos harness runs
it: embedded NATS and PostgreSQL, every service a process), with limits small enough to test."""

from __future__ import annotations

import pytest

from loadgen.chaos.stack import ChaosStack

# small limits so each can be crossed cheaply; the chaos workload stays well inside them
LIMITS_ENV = {
    "MAX_PROMPT_TOKENS": "4096",
    "MAX_OUTPUT_TOKENS": "64",
    "DEFAULT_MAX_TOKENS": "16",
    "MAX_CONCURRENT_CALLS_PER_SESSION": "3",
    "MAX_CONCURRENT_CALLS_PER_TENANT": "64",
    "MAX_REQUESTS_PER_S_PER_TENANT": "30",
    "REQUEST_BURST_PER_TENANT": "60",
}


@pytest.fixture(scope="session")
async def chaos_stack():
    stack = await ChaosStack(engines=2, extra_env=LIMITS_ENV).up()
    yield stack
    stack.down()
