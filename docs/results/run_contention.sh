#!/usr/bin/env bash
# Where calls queue: the coding agent (contexts of tens of thousands of tokens, so KV binds),
# at fixed rates between the quick run's last stable point and its first unstable one.
set -euo pipefail
.venv/bin/autellix sim --workload coding --policies fcfs,plas,atlas --rates 0.04,0.05 --seed 0 \
  --slo-multiple 5,10 --programs 150 --max-programs 1500 --no-doubling-check \
  --json docs/results/coding-1engine-rates.json --plot docs/results/coding-1engine-rates.png
# the same near saturation with swap preemption (KV copied to host and back) instead of recompute
.venv/bin/autellix sim --workload coding --policies fcfs,plas,atlas --rates 0.045,0.05 --seed 0 \
  --preemption swap --slo-multiple 5,10 --programs 150 --max-programs 1500 --no-doubling-check \
  --json docs/results/coding-1engine-swap.json
