"""A bare uvicorn endpoint that answers every request with the same bytes: the ceiling of the HTTP
server alone (same server, same client, same answer as the session API's), in a process of its own.

    python -m loadgen.bench.bare_asgi --port 8300 --body-file answer.json
"""

from __future__ import annotations

import argparse
from pathlib import Path


def make_app(body: bytes):
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]

    async def app(scope, receive, send) -> None:
        if scope["type"] != "http":  # lifespan: nothing to set up
            while (await receive())["type"] != "lifespan.shutdown":
                pass
            return
        more = True
        while more:  # read the request body, as any endpoint must
            more = (await receive()).get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
    return app


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    p = argparse.ArgumentParser(prog="python -m loadgen.bench.bare_asgi", description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--body-file", type=Path, required=True)
    args = p.parse_args(argv)
    uvicorn.run(make_app(args.body_file.read_bytes()), host="127.0.0.1", port=args.port, log_level="warning",
                access_log=False, lifespan="off")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
