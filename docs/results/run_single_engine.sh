#!/usr/bin/env bash
# Single-engine comparison of every policy on one workload (docs/results/README.md).
# Usage: docs/results/run_single_engine.sh WORKLOAD [extra autellix sim flags]
set -euo pipefail
w="$1"; shift
out="docs/results"
.venv/bin/autellix sim --workload "$w" --sweep --engines 1 --seed 0 --slo-multiple 5,10 \
  --programs 150 --max-programs 1500 --bisect-steps 1 \
  --json "$out/$w-1engine.json" --plot "$out/$w-1engine.png" "$@"
