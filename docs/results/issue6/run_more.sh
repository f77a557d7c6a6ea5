#!/usr/bin/env bash
# Issue 6: reruns with plots and a Belady trace per router, plus the memory-bound regime.
set -euo pipefail
OUT=docs/results/issue6
SIM="nice .venv/bin/autellix sim --quiet"
for RATE in 1 2; do
  $SIM --workload coding --engines 2 --rates $RATE --programs 40 --kv-policy prefix-lru,workflow \
       --router least-loaded,affinity --belady --json $OUT/coding_rate$RATE.json --plot $OUT/coding_rate$RATE.png
done
# memory-bound: 10,000 KV blocks per engine (160K tokens: an 8B model on an A100-40GB, about 20 GB of KV)
$SIM --workload coding --engines 2 --rates 1 --programs 40 --kv-policy prefix-lru,workflow \
     --router least-loaded,affinity --belady --num-blocks 10000 --json $OUT/coding_rate1_10k_blocks.json \
     --plot $OUT/coding_rate1_10k_blocks.png
