"""Side by side: `autellix sim --json` files of the same command from trees before and after the
promotion move (issue 16). Usage: python sim_promotion_compare.py DIR TAG1 TAG2 ... > out.json,
with DIR holding TAG-NAME.json for each tag; points are matched by rate (a sweep may visit
different rates per tree)."""

import json
import pathlib
import sys


def _point(p: dict) -> dict:
    return {"stable": p["stable"], "digest": p["digest"], "mean_norm_latency_s": p["mean_norm_latency_s"],
            "p99_norm_latency_s": p["p99_norm_latency_s"], "promotions": p["regime"]["promotions"],
            "preemptions": p["regime"]["preemptions"]}


def main() -> None:
    folder, tags = pathlib.Path(sys.argv[1]), sys.argv[2:]
    names = sorted({f.stem.removeprefix(f"{tags[0]}-") for f in folder.glob(f"{tags[0]}-*.json")})
    out = {}
    for name in names:
        runs = {t: json.loads((folder / f"{t}-{name}.json").read_text()) for t in tags
                if (folder / f"{t}-{name}.json").exists()}
        if len(runs) < 2:
            continue
        first = next(iter(runs.values()))
        entry = {"command": {t: r["command"] for t, r in runs.items()},
                 "max_rate_at_slo": {s: {t: r["ratios"][s]["max_rate"] for t, r in runs.items()}
                                     for s in first["ratios"]},
                 "starvation_check": {t: r["starvation_check"] for t, r in runs.items()},
                 "points": {}}
        for policy in first["policies"]:
            rates = sorted({round(p["rate"], 4) for r in runs.values() for p in r["policies"][policy]["points"]})
            entry["points"][policy] = {
                str(rate): {t: next((_point(p) for p in r["policies"][policy]["points"]
                                     if round(p["rate"], 4) == rate), None) for t, r in runs.items()}
                for rate in rates}
        out[name] = entry
    json.dump(out, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
