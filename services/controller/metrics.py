"""Prometheus series of the controller: anti-starvation promotions, the programs it watches, tenant shares."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

PROMOTIONS = Counter("autellix_controller_promotions", "Programs promoted against starvation (W and S reset)")
PROGRAMS_WATCHED = Gauge("autellix_controller_programs", "Programs the controller holds service figures of")
DECISION_FAILURES = Counter("autellix_controller_decision_failures", "Decision rounds that failed to publish")
TENANTS_BEHIND = Gauge("autellix_controller_tenants_over_share",
                       "Tenants above their fair share of recent service: their calls go behind the others'")
SNAPSHOTS_REFUSED = Counter("autellix_controller_tenant_counters_refused",
                            "Queue snapshots whose tenant counters were refused (malformed or out of range)")
