#!/usr/bin/env bash
# Issue 6: reruns of the default-memory multitenant points and coding rate 1 with the slowdown
# attainment column and plots (same commands as run_all.sh plus --plot).
set -euo pipefail
OUT=docs/results/issue6
SIM="nice .venv/bin/autellix sim --quiet"
$SIM --workload multitenant --engines 2 --rates 1.0 --programs 60 --kv-policy prefix-lru,workflow \
     --router least-loaded,affinity --fairness off,afs --policies fcfs,atlas \
     --json $OUT/multitenant_rate1.json --plot $OUT/multitenant_rate1.png
$SIM --workload coding --engines 2 --rates 1 --programs 40 --kv-policy prefix-lru,workflow \
     --router least-loaded,affinity --belady --json $OUT/coding_rate1.json --plot $OUT/coding_rate1.png
