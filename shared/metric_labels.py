"""Label values that come from clients (tenant, workload class, model), kept to a bounded set: a
Prometheus series per distinct value, so an unbounded label would grow every scrape without end."""

from __future__ import annotations

OTHER = "other"


class BoundedLabel:
    """The first `limit` distinct values pass as they are; any later one reads OTHER. Empty reads
    `empty` (a Prometheus label may be empty, but a dashboard legend then shows nothing)."""

    def __init__(self, limit: int = 64, empty: str = "none") -> None:
        self.limit = limit
        self.empty = empty
        self._seen: set[str] = set()

    def __call__(self, value: str | None) -> str:
        if not value:
            return self.empty
        if value in self._seen:
            return value
        if len(self._seen) < self.limit:
            self._seen.add(value)
            return value
        return OTHER
