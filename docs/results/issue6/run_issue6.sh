#!/usr/bin/env bash
# Issue 6 measurements: offline simulator, lite engine (and the emulated vLLM engine for fidelity),
# llama3.1-8b-a100 preset, V1 batching, recompute preemption, 2 engines, seed 0. Run from the
# repository root (about 40 min on 2 busy cores).
set -euo pipefail
OUT=docs/results/issue6
SIM="nice .venv/bin/autellix sim --quiet --engines 2"
KV="--kv-policy prefix-lru,workflow --router least-loaded,affinity"
# multitenant: the baseline (vLLM-style prefix cache, least-loaded) and SAGA's stack with AFS modes
BASE="--kv-policy prefix-lru --router least-loaded --fairness off --policies fcfs,atlas"
SAGA="--kv-policy workflow --router affinity --fairness off,afs,afs-hold,afs-hold-open --policies fcfs,atlas"
# coding: TCT and recompute share, Belady ratios (default memory: 27,500 KV blocks per engine); the
# rate-1 traces are also replayed at smaller capacities (same access stream, more pressure)
$SIM --workload coding --rates 1 --programs 40 $KV --belady --belady-capacities 24000,20000,16000,12000 \
     --json $OUT/coding_rate1.json --plot $OUT/coding_rate1.png
$SIM --workload coding --rates 2 --programs 40 $KV --belady --json $OUT/coding_rate2.json --plot $OUT/coding_rate2.png
$SIM --workload coding --rates 20 --programs 40 $KV --json $OUT/coding_peak.json --plot $OUT/coding_peak.png
# memory-bound: 10,000 KV blocks per engine (160K tokens: an 8B model on an A100-40GB)
$SIM --workload coding --rates 1 --programs 40 $KV --belady --num-blocks 10000 \
     --json $OUT/coding_rate1_10k_blocks.json --plot $OUT/coding_rate1_10k_blocks.png
$SIM --workload coding --rates 20 --programs 40 $KV --num-blocks 10000 \
     --json $OUT/coding_peak_10k_blocks.json --plot $OUT/coding_peak_10k_blocks.png
# between the two: 16,000 blocks, where the rate-1 affinity trace replayed under pressure without
# thrashing (chosen from the Belady replay above, not from a TCT)
$SIM --workload coding --rates 1 --programs 40 $KV --num-blocks 16000 \
     --json $OUT/coding_rate1_16k_blocks.json --plot $OUT/coding_rate1_16k_blocks.png
# browser
$SIM --workload browser --rates 2 --programs 40 $KV --belady --json $OUT/browser_rate2.json --plot $OUT/browser_rate2.png
# multitenant: SLO attainment by tenant class; rate 20 = peak (all programs within 3 s)
for point in "rate1:--rates 1" "peak:--rates 20" "rate1_10k_blocks:--rates 1 --num-blocks 10000" \
             "peak_10k_blocks:--rates 20 --num-blocks 10000" "rate1_16seqs:--rates 1 --max-num-seqs 16"; do
  name=${point%%:*}; args=${point#*:}
  $SIM --workload multitenant --programs 60 $args $BASE --json $OUT/multitenant_${name}_baseline.json
  $SIM --workload multitenant --programs 60 $args $SAGA --json $OUT/multitenant_${name}.json \
       --plot $OUT/multitenant_${name}.png
done
# fidelity of retention inside vLLM's block pool: lite vs emulated (vLLM's scheduler), 20 programs
for eng in lite emulated; do
  $SIM --engine $eng --workload coding --rates 1 --programs 20 $KV --json $OUT/fidelity_coding_${eng}.json
  $SIM --engine $eng --workload coding --rates 1 --programs 20 $KV --num-blocks 10000 \
       --json $OUT/fidelity_coding_10k_blocks_${eng}.json
done
