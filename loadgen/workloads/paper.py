"""Published figures to print beside measured workload statistics (`autellix workload-stats`).

Sources: the Autellix paper's workload figures (the Autellix paper's figures), the Agentix (NSDI 2026) analysis
(6.66 / 10.75 / 159.7 calls per program), the SAGA paper (SWE-bench mean 37 / max 150
steps, contexts 2-4K growing to 16-128K; WebArena mean 18 steps). Keys match `WorkloadStats` rows.
"""

from __future__ import annotations

PAPER_FIGURES: dict[str, dict[str, str]] = {
    "chatbot": {
        "calls/program": "6.66 mean (6.7-7.2), Pareto tail alpha ~1.5",
        "output tokens/call": "339 mean",
        "context tokens/call": "~8K mean, p99 ~100K (ShareGPT histories)",
    },
    "react": {
        "calls/program": "10.75 mean",
        "new prompt tokens/call": "735 mean (uncached prefill)",
        "output tokens/call": "34 mean",
        "context tokens/call": "~5K tool schemas + history",
    },
    "mcts": {
        "calls/program": "159.7 mean",
        "new prompt tokens/call": "467 mean (paper: prompt)",
        "output tokens/call": "73 mean",
        "threads/program": "5-way expansion tree",
    },
    "mapreduce": {"threads/program": "fork/join (no figures published)"},
    "mixed": {"calls/program": "equal mix of the four classes"},
    "coding": {
        "calls/program": "37 mean, 150 max (SWE-bench, SAGA)",
        "context tokens/call": "2-4K growing to 16-128K (SAGA)",
        "tool pause s/call": "45 ms read_file .. 2.4 s run_test medians (SAGA Fig. 3)",
    },
    "browser": {"calls/program": "18 mean (WebArena, SAGA)"},
    "multitenant": {"calls/program": "heavy/medium/light tenants (SAGA Table 6)"},
}
PAPER_FIGURES["sharegpt-trace"] = PAPER_FIGURES["chatbot"]
PAPER_FIGURES["bfcl-trace"] = PAPER_FIGURES["react"]
