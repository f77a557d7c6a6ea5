"""Prometheus series of the controller: anti-starvation promotions and the programs it watches."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

PROMOTIONS = Counter("autellix_controller_promotions", "Programs promoted against starvation (W and S reset)")
PROGRAMS_WATCHED = Gauge("autellix_controller_programs", "Programs the controller holds service figures of")
DECISION_FAILURES = Counter("autellix_controller_decision_failures", "Decision rounds that failed to publish")
