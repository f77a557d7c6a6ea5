"""Periodically close sessions abandoned for longer than the idle TTL."""

from __future__ import annotations

import asyncio
from typing import Protocol

from shared.logging import get_logger
from shared.tasks import cancel_and_wait


class _Expirer(Protocol):
    async def expire_idle(self) -> list[str]: ...


class IdleSweeper:
    def __init__(self, target: _Expirer, idle_ttl_s: float, interval_s: float) -> None:
        self.target = target
        self.idle_ttl_s = idle_ttl_s
        self.interval_s = interval_s
        self.log = get_logger(component="idle_sweeper")
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="process_table:idle_sweeper")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.target.expire_idle()
            except Exception as exc:  # the next sweep tries again; the sweeper must not die
                self.log.warning("idle_sweep_failed", error=f"{type(exc).__name__}: {exc}")
