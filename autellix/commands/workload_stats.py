"""`autellix workload-stats`: what the workload generators produce, beside the papers' figures."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from loadgen.traces.errors import TraceUnavailable
from loadgen.workloads import WORKLOADS, make_programs
from loadgen.workloads.paper import PAPER_FIGURES
from loadgen.workloads.stats import Row, workload_rows

DEFAULT_OUT = Path("docs/results/workload_stats.md")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("workload-stats", help="statistics of the generated workloads vs the papers' figures")
    parser.add_argument("--workload", default="all", help=f"one of {', '.join(WORKLOADS)} or all (default)")
    parser.add_argument("--programs", type=int, default=500, help="programs per workload (default 500)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tool-delays", action="store_true", help="draw tool pauses for the paper workloads too")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="markdown file to write ('-' for none)")
    parser.set_defaults(handler=run)


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.2f}"


def _table(name: str, rows: list[Row]) -> list[str]:
    paper = PAPER_FIGURES.get(name, {})
    lines = ["| metric | mean | p50 | p99 | max | paper |", "|---|---:|---:|---:|---:|---|"]
    for row in rows:
        cells = [row.metric, _fmt(row.mean), _fmt(row.p50), _fmt(row.p99), _fmt(row.max), paper.get(row.metric, "")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _by_group(programs: list) -> list[str]:
    """Per (tenant, program class) averages, for mixes."""
    groups: dict[tuple[str, str], list] = {}
    for p in programs:
        groups.setdefault((p.tenant, p.workload), []).append(p)
    if len(groups) < 2:
        return []
    lines = [
        "",
        "| tenant | class | programs | calls/program | context tokens/call | output tokens/program |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for (tenant, cls), members in sorted(groups.items()):
        calls = [c for p in members for c in p.calls]
        lines.append(
            f"| {tenant} | {cls} | {len(members)} | {_fmt(len(calls) / len(members))} | "
            f"{_fmt(sum(c.prompt_tokens for c in calls) / len(calls))} | "
            f"{_fmt(sum(p.output_tokens for p in members) / len(members))} |"
        )
    return lines


def _trace_note(name: str) -> str | None:
    if name == "sharegpt-trace":
        from loadgen.traces.sharegpt import load_sharegpt

        return load_sharegpt(None, None).summary()
    if name == "bfcl-trace":
        from loadgen.traces.bfcl import CATEGORIES, load_bfcl

        return load_bfcl(None, CATEGORIES).summary()
    return None


def run(args: argparse.Namespace) -> int:
    if args.programs < 1:
        raise ValueError(f"--programs must be >= 1, got {args.programs}")
    if args.workload != "all" and args.workload not in WORKLOADS:
        raise ValueError(f"unknown workload {args.workload!r}; valid: {', '.join(WORKLOADS)}, all")
    names = list(WORKLOADS) if args.workload == "all" else [args.workload]
    command = f"autellix workload-stats --workload {args.workload} --programs {args.programs} --seed {args.seed}"
    command += " --tool-delays" if args.tool_delays else ""
    lines = [
        "# Workload statistics",
        "",
        f"Command: `{command}`. Tokens of real traces are estimated at 4 characters per token.",
        "`new prompt tokens/call` = the program's own prompt tokens not already in the context of the",
        "calls it depends on (what a perfect prefix cache still prefills; system prompts and tool schemas",
        "shared across programs are left out); `context tokens/call` = the whole prompt, which occupies",
        "KV and costs attention; `cross-program shared` = system prompts and tool schemas.",
    ]
    for name in names:
        lines += ["", f"## {name}: {WORKLOADS[name].description}", ""]
        opts = {"tool_delays": True} if args.tool_delays else {}
        try:
            programs = make_programs(name, args.programs, args.seed, **opts)
            note = _trace_note(name)
        except TraceUnavailable as exc:
            lines.append(f"Skipped: {exc}")
            continue
        if note:
            lines += [note, ""]
        lines += _table(name, workload_rows(programs)) + _by_group(programs)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out != "-":
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    return 0
