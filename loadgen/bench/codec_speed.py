"""Per-message encode and decode time of the wire codec, in CPU microseconds (best of rounds).

    python -m loadgen.bench.codec_speed                     # this tree
    python -m loadgen.bench.codec_speed --against OLD_TREE  # this tree and another checkout, alternated

With `--against`, each round runs the measurement once in each tree (a subprocess with that tree
first on the path) and the JSON gives both and their ratios, so a comparison is always side by side.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

_MEASURE = """
import json, sys, time
sys.path.insert(0, {tree!r})
from shared.protocol import decode, encode
from shared.protocol import messages as m
samples = {{
    "call.completed": m.CallCompleted(call_id="c1", program_id="p1", engine_id="e0", service_s=1.25, wait_s=0.5,
                                      preemptions=1, prompt_tokens=3, output_tokens=16,
                                      thread_service_at_submit_s=2.0, submit_epoch=0),
    "route.call": m.RouteCall(call_id="c1", program_id="p1", thread_id="t2", parent_thread_id="main", tenant="acme",
                              prompt_text="hi" * 50, prompt_token_ids=list(range(100)), prompt_tokens=100,
                              prompt_segments=[("sys", 60), ("u1", 40)], max_tokens=16, stream=True,
                              reply_subject="inbox.c1", submitted_at_ns=5),
    "engine.queue_snapshot": m.EngineQueueSnapshot(engine_id="e0", taken_at_ns=3, waiting=[
        m.WaitingCall(call_id=f"c{{i}}", program_id="p2", wait_s=1.0, level=1) for i in range(20)]),
}}
out = {{}}
for name, msg in samples.items():
    data = encode(msg, "pub", 1, sent_at_ns=1)
    best_encode = best_decode = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        for _ in range({n}):
            encode(msg, "pub", 1, sent_at_ns=1)
        t1 = time.process_time()
        for _ in range({n}):
            decode(data)
        t2 = time.process_time()
        best_encode = min(best_encode, (t1 - t0) / {n} * 1e6)
        best_decode = min(best_decode, (t2 - t1) / {n} * 1e6)
    out[name] = {{"encode_us": round(best_encode, 2), "decode_us": round(best_decode, 2)}}
print(json.dumps(out))
"""


def measure(tree: Path, n: int) -> dict:
    code = _MEASURE.format(tree=str(tree.resolve()), n=n)
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--against", type=Path, help="another checkout to measure alternately")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--messages", type=int, default=20_000, help="messages per timing")
    args = p.parse_args(argv)
    here = Path(__file__).resolve().parents[2]
    runs: dict[str, list[dict]] = {"this": [], "other": []}
    for _ in range(args.rounds):
        runs["this"].append(measure(here, args.messages))
        if args.against is not None:
            runs["other"].append(measure(args.against, args.messages))
    report: dict = {"rounds": runs["this"]}
    if args.against is not None:
        report = {"this": runs["this"], "other": runs["other"], "median_ratio_this_over_other": {
            name: {kind: round(statistics.median(r[name][kind] / o[name][kind]
                                                 for r, o in zip(runs["this"], runs["other"], strict=True)), 3)
                   for kind in ("encode_us", "decode_us")}
            for name in runs["this"][0]}}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
