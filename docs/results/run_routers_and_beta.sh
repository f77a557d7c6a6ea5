#!/usr/bin/env bash
# Four-engine router comparison (react: long shared prompts) and the anti-starvation beta sweep
# (mixed, fixed rates spanning light to near-saturation load). See docs/results/README.md.
set -euo pipefail
out="docs/results"
for router in locality round-robin; do
  .venv/bin/autellix sim --workload react --policies atlas --engines 4 --router "$router" --sweep \
    --seed 0 --slo-multiple 5 --programs 150 --max-programs 1500 --bisect-steps 1 \
    --json "$out/react-4engine-$router.json" --plot "$out/react-4engine-$router.png"
done
for beta in 5 1 3 7 none; do
  policies=atlas; [ "$beta" = 5 ] && policies=fcfs,atlas
  .venv/bin/autellix sim --workload mixed --policies "$policies" --beta "$beta" --rates 0.18,0.24 \
    --seed 0 --slo-multiple 5,10 --programs 150 --max-programs 1500 --no-doubling-check \
    --json "$out/mixed-beta-$beta.json"
done
