#!/usr/bin/env bash
# Issue 6 on the live stack: `autellix up` (2 real-time lite engines, embedded NATS + PostgreSQL)
# driven by `autellix loadgen` with the coding workload, once per configuration:
#   baseline: prefix-cache LRU + least-loaded   (ENGINE_KV_POLICY=prefix-lru ROUTER_POLICY=least-loaded)
#   issue 6:  retention + affinity + X-Next-Tool (ENGINE_KV_POLICY=workflow ROUTER_AFFINITY=true, --tool-hints)
# Usage: [CONFIGS="..."] docs/results/issue6/live_run.sh [programs] [rate]   (defaults 40 programs at 1/s, as the
# simulator's coding_rate1.json). Run from the repository root; each run takes TCT + arrivals
# (about 7 minutes for the defaults on 2 cores). Writes live_<config>.json and, from the audit
# stream, live_<config>_events.json (preemptions and their recomputed tokens) next to this script.
set -euo pipefail
PROGRAMS=${1:-40}
RATE=${2:-1}
OUT=docs/results/issue6
KEY=sk-issue6-0123456789
PORT=${PORT:-8650}

run_config() {
    local name=$1 env_vars=$2 hints=$3
    local state=/tmp/autellix-issue6-live-$name
    rm -rf "$state"
    # shellcheck disable=SC2086
    env $env_vars AUTELLIX_API_KEYS="bench:$KEY" LOG_LEVEL=warning \
        .venv/bin/autellix up --engines 2 --port "$PORT" --nats-port 0 --state-dir "$state" \
        >"$state.up.log" 2>&1 &
    local up_pid=$!
    for _ in $(seq 120); do
        curl -fsS "http://127.0.0.1:$PORT/healthz" 2>/dev/null | grep -q '"e1"' && break
        sleep 0.5
    done
    echo "[$name] up (pid $up_pid), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    .venv/bin/autellix loadgen --url "http://127.0.0.1:$PORT" --api-key "$KEY" --workload coding \
        --rate "$RATE" --programs "$PROGRAMS" --seed 0 --tool-delays $hints --drain-timeout 900 \
        --policy-label "$name" --quiet --json "$OUT/live_$name.json" || true
    echo "[$name] done, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    .venv/bin/autellix events tail --json --state-dir "$state" 2>/dev/null \
        | .venv/bin/python docs/results/issue6/live_events.py >"$OUT/live_${name}_events.json" || true
    kill -INT "$up_pid"
    wait "$up_pid" || true
}

# CONFIGS picks the runs (default: the two above); the ablations: prefix-lru+affinity, workflow+least-loaded
for config in ${CONFIGS:-prefix-lru+least-loaded workflow+affinity}; do
    case $config in
        prefix-lru+least-loaded) run_config "$config" "ENGINE_KV_POLICY=prefix-lru ROUTER_POLICY=least-loaded" "" ;;
        workflow+affinity) run_config "$config" "ENGINE_KV_POLICY=workflow ROUTER_AFFINITY=true" "--tool-hints" ;;
        prefix-lru+affinity) run_config "$config" "ENGINE_KV_POLICY=prefix-lru ROUTER_AFFINITY=true" "--tool-hints" ;;
        workflow+least-loaded) run_config "$config" "ENGINE_KV_POLICY=workflow ROUTER_POLICY=least-loaded" "--tool-hints" ;;
        *) echo "unknown config $config" >&2; exit 2 ;;
    esac
done
