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
# the 70B preset (TP4 on A100): slower steps, the same question
.venv/bin/autellix sim --workload chatbot --preset llama3.1-70b-tp4-a100 --policies fcfs-v0,fcfs,plas,atlas \
  --sweep --seed 0 --slo-multiple 5,10 --programs 150 --max-programs 1500 --bisect-steps 1 \
  --json docs/results/chatbot-70b-1engine.json --plot docs/results/chatbot-70b-1engine.png
# coding agent, full sweep, swap preemption
.venv/bin/autellix sim --workload coding --policies fcfs,plas,atlas --preemption swap --sweep --seed 0 \
  --slo-multiple 5,10 --programs 150 --max-programs 1500 --bisect-steps 1 \
  --json docs/results/coding-swap-1engine.json --plot docs/results/coding-swap-1engine.png
