"""`autellix bench mesh`: added latency of the whole serving path over a direct engine call,
with a zero-time lite engine, and calls/s beside the same-run ceilings that bound it (bare HTTP,
NATS request/reply, JetStream, the direct engine), repeated for the spread."""

from __future__ import annotations

from loadgen.live.mesh_bench_args import add_arguments, argv_of


def register_bench(benches) -> None:
    p = benches.add_parser("mesh", help="serving-path overhead: added latency and calls/s",
                           description=__doc__.splitlines()[0])
    add_arguments(p)
    p.set_defaults(handler=_run)


def _run(args) -> int:
    from loadgen.live import mesh_bench

    return mesh_bench.main(argv_of(args))
