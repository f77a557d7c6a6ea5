"""The results README's table from multi-host run files (loadgen.multihost.run's JSON):

    python -m loadgen.multihost.summary docs/results/multihost/run-*.json

One row per file: the node cut, calls, lost (and why), counted twice, completions the restarted
agent replayed from its outbox, calls re-placed, hit calls and their recovery, when the
completions stream had a new leader, and the longest stretch with no call answered within
SILENCE_WINDOW_S after each fault (it also covers calls that could not start, which recovery,
counted over calls in flight at a fault, does not)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from loadgen.multihost.recovery import longest_silence

SILENCE_WINDOW_S = 6.0  # the load stops starting programs 6 s after the kill

HEADER = ("| file | node cut | calls | lost | counted twice | replayed from the outbox | re-placed | "
          "hit / recovered | recovery p50 / p99 (s) | new completions leader (s) | "
          "longest silence after cut / kill (s) | load (1 min) |\n" + "|---" * 12 + "|")


def row(path: Path) -> str:
    r = json.loads(path.read_text())
    detail = ", ".join(f"{k} {v}" for k, v in r["lost_detail"].items() if v)
    rec, engine = r["recovery"], r["lost_engine"]
    leaders = [v for v in r.get("completions_leader_after_cut_s", {}).values() if v is not None]
    ends = [t["end"] for t in r["timings"] if t["completed"]]
    silences = [longest_silence(ends, f["at_s"], SILENCE_WINDOW_S) for f in r["faults"][:2]]
    replayed = r.get("outbox", {}).get("replayed_by_restarted_agent", "n/a")
    again = engine.get("placed_again_and_completed", engine.get("routed_twice_or_more"))
    return (f"| {path.name} | {r['faults'][0]['host']} | {r['calls']['logical']} | "
            f"{r['lost']}{f' ({detail})' if detail else ''} | {r['double_counted']} | {replayed} | {again} | "
            f"{rec['hit']} / {rec['recovered']} | {rec['p50_s']} / {rec['p99_s']} | "
            f"{max(leaders) if leaders else 'n/a'} | {silences[0]} / {silences[1]} | "
            f"{r['machine']['loadavg_1m_at_end']} |")


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]]
    if not paths:
        raise SystemExit("usage: python -m loadgen.multihost.summary RUN.json [RUN.json ...]")
    print(HEADER)
    for path in paths:
        print(row(path))


if __name__ == "__main__":
    main()
