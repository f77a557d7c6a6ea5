#!/usr/bin/env bash
# Issue 6 measurements: offline simulator, lite engine, llama3.1-8b-a100 preset, V1 batching,
# recompute preemption, 2 engines, seed 0. Run from the repository root (about 15 min on 2 cores).
set -euo pipefail
OUT=docs/results/issue6
SIM="nice .venv/bin/autellix sim --quiet --engines 2"
KV="--kv-policy prefix-lru,workflow --router least-loaded,affinity"
MT="--fairness off,afs --policies fcfs,atlas"
# coding: TCT and recompute share, Belady ratios (default memory: 27,500 KV blocks per engine)
$SIM --workload coding --rates 1 --programs 40 $KV --belady --json $OUT/coding_rate1.json --plot $OUT/coding_rate1.png
$SIM --workload coding --rates 2 --programs 40 $KV --belady --json $OUT/coding_rate2.json --plot $OUT/coding_rate2.png
$SIM --workload coding --rates 20 --programs 40 $KV --json $OUT/coding_peak.json --plot $OUT/coding_peak.png
# memory-bound: 10,000 KV blocks per engine (160K tokens: an 8B model on an A100-40GB)
$SIM --workload coding --rates 1 --programs 40 $KV --belady --num-blocks 10000 \
     --json $OUT/coding_rate1_10k_blocks.json --plot $OUT/coding_rate1_10k_blocks.png
$SIM --workload coding --rates 20 --programs 40 $KV --num-blocks 10000 \
     --json $OUT/coding_peak_10k_blocks.json --plot $OUT/coding_peak_10k_blocks.png
# browser
$SIM --workload browser --rates 2 --programs 40 $KV --belady --json $OUT/browser_rate2.json --plot $OUT/browser_rate2.png
# multitenant: SLO attainment by tenant class with and without AFS, FCFS and ATLAS; rate 20 = peak
$SIM --workload multitenant --rates 1 --programs 60 $KV $MT --json $OUT/multitenant_rate1.json --plot $OUT/multitenant_rate1.png
$SIM --workload multitenant --rates 20 --programs 60 $KV $MT --json $OUT/multitenant_peak.json --plot $OUT/multitenant_peak.png
$SIM --workload multitenant --rates 1 --programs 60 $KV $MT --num-blocks 10000 \
     --json $OUT/multitenant_rate1_10k_blocks.json --plot $OUT/multitenant_rate1_10k_blocks.png
$SIM --workload multitenant --rates 20 --programs 60 $KV $MT --num-blocks 10000 \
     --json $OUT/multitenant_peak_10k_blocks.json --plot $OUT/multitenant_peak_10k_blocks.png
# multitenant where calls queue: 16 running calls per engine
$SIM --workload multitenant --rates 1 --programs 60 $KV $MT --max-num-seqs 16 \
     --json $OUT/multitenant_rate1_16seqs.json --plot $OUT/multitenant_rate1_16seqs.png
