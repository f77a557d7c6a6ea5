"""Prometheus metrics of the API (module-level, as prometheus_client registers them once per process)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

CALLS = Counter("autellix_api_calls_total", "LLM calls served", ["endpoint", "outcome"])
PROMPT_TOKENS = Counter("autellix_api_prompt_tokens_total",
                        "Prompt tokens of served calls (a real model's own tokenizer; characters / 4 when simulated)")
OUTPUT_TOKENS = Counter("autellix_api_output_tokens_total",
                        "Tokens generated for served calls on simulated engines (a real engine's answer carries "
                        "its usage, and call.completed its output tokens)")
SESSIONS = Counter("autellix_api_session_ops_total", "Session operations", ["op", "outcome"])

_LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
CALL_LATENCY_S = Histogram("autellix_api_call_latency_seconds", "Call latency, request in to last token",
                           buckets=_LATENCY_BUCKETS_S)
FIRST_TOKEN_S = Histogram("autellix_api_first_token_seconds", "Time to first token",
                          buckets=_LATENCY_BUCKETS_S)
