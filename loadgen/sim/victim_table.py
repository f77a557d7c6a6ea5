"""The KV-victim rules side by side: `autellix sim --kv-victim policy|arrival` result files.

    python -m loadgen.sim.victim_table docs/results/kv_victim/*.json

A file's rule is its engine's `kv_victim`; files of one workload, seed and engine limits pair up
by policy, each rule against vLLM's own ("arrival"). Per policy, seed and rule: both max rates at
the SLO (and their brackets), their ratio, and
at the highest rate both rules ran and both held stable (the searches share their doubling walk)
the preemptions, recomputed tokens and prefix-hit rate of each.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

RULES = ("arrival", "policy", "readmit")  # the first is the baseline every other is compared to


def _regime_key(result: dict) -> tuple:
    eng = result["engine"]
    return (result["workload"], result["seed"], eng["max_num_seqs"], eng["num_blocks"])


def collect(paths: list[str]) -> dict:
    """{(workload, seed, seqs, blocks): {policy: {rule: policy result (with the SLO label)}}}."""
    out: dict = defaultdict(lambda: defaultdict(dict))
    for path in paths:
        result = json.loads(Path(path).read_text())
        rule = result["engine"].get("kv_victim")
        if rule not in RULES:
            raise ValueError(f"{path}: no kv_victim rule in its engine settings (not a --kv-victim run)")
        label = result["slos"][0]["label"]
        for name, pol in result["policies"].items():
            if rule in out[_regime_key(result)][name]:
                raise ValueError(f"{path}: a second {rule} result for {name} in the same regime")
            out[_regime_key(result)][name][rule] = (pol, label)
    return out


def _at(pol: dict, rate: float) -> dict:
    return next(p for p in pol["points"] if p["rate"] == rate)


def rows(collected: dict) -> list[dict]:
    """One row per regime, policy and rule other than the baseline, where both ran."""
    table = []
    base_rule = RULES[0]
    for key in sorted(collected, key=str):
        for name, by_rule in sorted(collected[key].items()):
            for rule in RULES[1:]:
                if base_rule in by_rule and rule in by_rule:
                    table.append(_row(key, name, rule, by_rule[base_rule], by_rule[rule]))
    return table


def _row(key: tuple, name: str, rule: str, base: tuple, other: tuple) -> dict:
    (old, label), (new, _) = base, other
    rates = ({p["rate"] for p in old["points"] if p["stable"]}
             & {p["rate"] for p in new["points"] if p["stable"]})
    common = max(rates) if rates else None
    row = {"workload": key[0], "seed": key[1], "max_num_seqs": key[2], "num_blocks": key[3],
           "policy": name, "rule": rule, "common_rate": common}
    for side, pol in (("base", old), ("rule", new)):
        crossing = pol["max_rate_at_slos"][label]["crossing"]
        row[f"{side}_max_rate"] = crossing["max_rate"]
        last, bad = crossing.get("last_good_rate"), crossing.get("first_bad_rate")
        row[f"{side}_bracket"] = (bad / last - 1) if last and bad else None
        if common is not None:
            reg = _at(pol, common).get("regime") or {}
            row[f"{side}_at_common"] = {k: reg.get(k) for k in ("preemptions", "recomputed_tokens", "prefix_hit_rate")}
    a, b = row["base_max_rate"], row["rule_max_rate"]
    row["ratio"] = b / a if a and b else None
    return row


def _fmt(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def markdown(table: list[dict]) -> str:
    lines = [f"| regime | policy | rule | max rate, {RULES[0]} | max rate, rule | rule / {RULES[0]} | brackets | "
             f"at rate (both stable) | preemptions {RULES[0]} / rule | recomputed tokens {RULES[0]} / rule | "
             f"prefix-hit {RULES[0]} / rule |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        blocks = f", {r['num_blocks']} blocks" if r["num_blocks"] else ""
        regime = f"{r['workload']}, {r['max_num_seqs']} seqs{blocks}, seed {r['seed']}"
        a, p = r.get("base_at_common") or {}, r.get("rule_at_common") or {}
        brackets = f"{_fmt(r['base_bracket'], '.1%')} / {_fmt(r['rule_bracket'], '.1%')}"
        lines.append(
            f"| {regime} | {r['policy']} | {r['rule']} | {_fmt(r['base_max_rate'], '.4g')} "
            f"| {_fmt(r['rule_max_rate'], '.4g')} | {_fmt(r['ratio'], '.3f')} | {brackets} "
            f"| {_fmt(r['common_rate'], '.4g')} | {a.get('preemptions', '-')} / {p.get('preemptions', '-')} "
            f"| {a.get('recomputed_tokens', '-')} / {p.get('recomputed_tokens', '-')} "
            f"| {_fmt(a.get('prefix_hit_rate'), '.3f')} / {_fmt(p.get('prefix_hit_rate'), '.3f')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    print(markdown(rows(collect(paths))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
