"""Prometheus series of the router: placements by the reason class of the decision, failures,
work-stealing moves, and the engines it sees live."""

from __future__ import annotations

from functools import lru_cache

from prometheus_client import Counter, Gauge

DECISIONS = Counter("autellix_router_decisions", "Calls placed on an engine, by the kind of decision",
                    ["reason", "engine"])
PLACEMENT_FAILURES = Counter("autellix_router_placement_failures", "Placements that failed", ["cause"])
for _cause in ("no_engine", "engine_unreachable"):  # exported at 0 from the start: a rate needs a first sample
    PLACEMENT_FAILURES.labels(_cause)
CALLS_STOLEN = Counter("autellix_router_calls_stolen", "Queued calls moved to an idle engine (work stealing)")
LIVE_ENGINES = Gauge("autellix_router_live_engines", "Engines whose heartbeats the router sees")

# a decision's reason names numbers and ids ("least-loaded: load 3.2"); its label is the kind only
_REASON_CLASSES = (("round-robin", "round_robin"), ("locality", "locality"), ("least-loaded", "least_loaded"),
                   ("affinity", "affinity"), ("new session", "new_session"), ("pinned engine", "repinned"),
                   ("stolen", "stolen"))


def reason_class(reason: str) -> str:
    for prefix, label in _REASON_CLASSES:
        if reason.startswith(prefix):
            return label
    return "other"


_decisions = lru_cache(maxsize=1024)(DECISIONS.labels)  # a label lookup costs more than the increment


def count_decision(reason: str, engine_id: str) -> None:
    _decisions(reason_class(reason), engine_id).inc()
