"""Pull+ack rate of the process table's completion puller against an older puller module, side by
side on one NATS server (3 alternating rounds, 20,000 completions each, batch 256).

    python docs/results/one_owner/pull_ack_compare.py OLD_PULLER.py
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from runtime.nats_server import NatsServer  # noqa: E402
from services.process_table import wire  # noqa: E402
from services.process_table.puller import StreamingPuller  # noqa: E402
from shared.bus import Bus  # noqa: E402
from shared.protocol import messages as m  # noqa: E402
from shared.protocol import subjects  # noqa: E402

NUM = 20_000


def _load(path: str):
    spec = importlib.util.spec_from_file_location("old_puller", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.StreamingPuller


async def _rate(bus: Bus, cls, program: str) -> float:
    puller = cls(bus, "b" + uuid.uuid4().hex[:8], subjects.events_of_program(program), types=(m.CallCompleted,),
                 batch_size=256, prepare=wire.completion_from_wire)
    t0 = time.perf_counter()
    await puller.start()
    got = 0
    while got < NUM:
        batch = await puller.take()
        got += len(batch)
        await puller.ack(batch)
    await bus.nc.flush()
    rate = NUM / (time.perf_counter() - t0)
    await puller.stop()
    return rate


async def main(old_path: str) -> None:
    server = NatsServer(Path(tempfile.mkdtemp()) / "nats").start()
    try:
        bus = await Bus.connect(server.url, service="bench")
        await bus.ensure_streams()
        program = "p" + uuid.uuid4().hex[:8]
        for k in range(NUM):
            await bus.publish_event_nowait(m.CallCompleted(call_id=f"{program}-c{k}", program_id=program,
                                                           engine_id="e0", service_s=0.1, wait_s=0.0))
        await bus.flush_events()
        rates: dict[str, list[float]] = {"old": [], "new": []}
        for _ in range(3):
            for name, cls in (("old", _load(old_path)), ("new", StreamingPuller)):
                rates[name].append(await _rate(bus, cls, program))
        print(json.dumps({"msgs_per_s": {k: [round(x) for x in v] for k, v in rates.items()},
                          "median_ratio_new_over_old": round(statistics.median(rates["new"]) /
                                                             statistics.median(rates["old"]), 3)}))
        await bus.close()
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
