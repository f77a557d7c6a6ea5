"""Controller: cluster-wide anti-starvation (and, later, tenant fairness) over engine queue snapshots."""
