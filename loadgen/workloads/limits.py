"""Bounds every generator respects (the served model's, not a workload figure)."""

# Llama-3.1 context window (the paper's models): a program stops before a call would exceed it.
MAX_CONTEXT_TOKENS = 131_072
