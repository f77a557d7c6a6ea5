"""Container health probe for services without HTTP: asks `cmd.health.<service>` over NATS.

    python docker/healthcheck.py router      # exit 0 when an instance answers ok within 2 s
    python docker/healthcheck.py engine:e0   # exit 0 when engine e0's own heartbeat arrives
"""

from __future__ import annotations

import asyncio
import sys

from shared.bus import Bus
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.settings import MeshSettings


async def probe(service: str) -> int:
    # the container's own NATS role (NATS_URL, NATS_USER, NATS_PASSWORD_FILE), like its service
    bus = await Bus.connect(MeshSettings().nats_url, "healthcheck", 2.0)
    try:
        if service.startswith("engine:"):  # several agents share one health subject: check this one
            engine_id = service.removeprefix("engine:")
            sub = await bus.nc.subscribe(subjects.engine_heartbeat(engine_id))
            await sub.next_msg(timeout=3.0)
            print(f"engine {engine_id}: heartbeat seen")
            return 0
        status = await bus.request(subjects.health(service), m.HealthCheck(), timeout_s=2.0)
        print(f"{service}: ok={status.ok} {status.detail}")
        return 0 if status.ok else 1
    except Exception as exc:  # any failure is "unhealthy"; the reason goes to the log
        print(f"{service}: unhealthy ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 1
    finally:
        await bus.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python docker/healthcheck.py SERVICE")
    sys.exit(asyncio.run(probe(sys.argv[1])))
