#!/usr/bin/env bash
# The SERPT table's 8 regimes again, with SERPT fed clients' remaining-calls hints at three errors.
# Run from the repository root, alone on the machine: bash docs/results/size_hints/run.sh
set -euo pipefail
out=docs/results/size_hints
policies=fcfs,srpt,serpt,serpt+hints:0,serpt+hints:0.5,serpt+hints:1
run() {
  local name=$1; shift
  /usr/bin/time -f "$name cpu %U s wall %e s" -a -o $out/cpu.log \
    autellix sim --policies $policies --programs 300 --bisect-steps 5 --slo-multiple 5 --no-doubling-check \
      --json $out/$name.json --quiet "$@"
}
: > $out/cpu.log
for seed in 0 1; do
  run chatbot-32seqs-seed$seed --workload chatbot --max-num-seqs 32 --seed $seed
  run mapreduce-32seqs-seed$seed --workload mapreduce --max-num-seqs 32 --seed $seed
  run mapreduce-64seqs-seed$seed --workload mapreduce --max-num-seqs 64 --seed $seed
  run react-8000blocks-seed$seed --workload react --num-blocks 8000 --seed $seed
done
