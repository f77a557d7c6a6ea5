#!/usr/bin/env bash
# Issue 6: multitenant interference where calls queue (memory-bound, 10,000 KV blocks per engine),
# with and without AFS, FCFS and ATLAS; the same at saturation (rate 20/s) for the throughput cost.
set -euo pipefail
OUT=docs/results/issue6
SIM="nice .venv/bin/autellix sim --quiet"
$SIM --workload multitenant --engines 2 --rates 1 --programs 60 --kv-policy prefix-lru,workflow \
     --router least-loaded,affinity --fairness off,afs --policies fcfs,atlas --num-blocks 10000 \
     --json $OUT/multitenant_rate1_10k_blocks.json --plot $OUT/multitenant_rate1_10k_blocks.png
$SIM --workload multitenant --engines 2 --rates 20 --programs 60 --kv-policy prefix-lru,workflow \
     --router least-loaded,affinity --fairness off,afs --policies fcfs,atlas --num-blocks 10000 \
     --json $OUT/multitenant_peak_10k_blocks.json --plot $OUT/multitenant_peak_10k_blocks.png
$SIM --workload coding --engines 2 --rates 20 --programs 40 --kv-policy prefix-lru,workflow \
     --router least-loaded,affinity --num-blocks 10000 \
     --json $OUT/coding_peak_10k_blocks.json --plot $OUT/coding_peak_10k_blocks.png
