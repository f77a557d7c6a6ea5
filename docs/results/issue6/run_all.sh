#!/usr/bin/env bash
# Issue 6 measurements (offline simulator, lite engine, llama3.1-8b-a100 preset, 2 engines, seed 0).
# Run from the repository root; each command writes one JSON beside this script.
set -euo pipefail
OUT=docs/results/issue6
SIM="nice .venv/bin/autellix sim --quiet"
# 1. coding: retention + affinity vs prefix-cache LRU + least-loaded (and the ablations), Belady replay
$SIM --workload coding --engines 2 --rates 1.0 --programs 40 --kv-policy prefix-lru,workflow \
     --router least-loaded,affinity --belady --json $OUT/coding_rate1.json
$SIM --workload coding --engines 2 --rates 2.0 --programs 40 --kv-policy prefix-lru,workflow \
     --router least-loaded,affinity --belady --json $OUT/coding_rate2.json
# 2. multitenant: light-tenant SLO attainment with and without AFS, with FCFS and ATLAS
$SIM --workload multitenant --engines 2 --rates 1.0 --programs 60 --kv-policy prefix-lru,workflow \
     --router least-loaded,affinity --fairness off,afs --policies fcfs,atlas --json $OUT/multitenant_rate1.json
# 3. peak throughput: every program arrives within a few seconds (saturation); completed programs/s
$SIM --workload coding --engines 2 --rates 20 --programs 40 --kv-policy prefix-lru,workflow \
     --router least-loaded,affinity --json $OUT/coding_peak.json
$SIM --workload multitenant --engines 2 --rates 20 --programs 60 --kv-policy prefix-lru,workflow \
     --router least-loaded,affinity --fairness off,afs --policies fcfs,atlas --json $OUT/multitenant_peak.json
# 4. browser
$SIM --workload browser --engines 2 --rates 2.0 --programs 40 --kv-policy prefix-lru,workflow \
     --router least-loaded,affinity --belady --json $OUT/browser_rate2.json
