"""The metric names a PromQL expression reads (enough PromQL for a dashboard's queries)."""

from __future__ import annotations

import re

_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset",
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values", "group",
    "inf", "nan",
}
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_SELECTORS = re.compile(r"\{[^}]*\}")  # label matchers
_RANGES = re.compile(r"\[[^\]]*\]")  # [5m], [$__rate_interval], subqueries
_GROUPINGS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_VARIABLES = re.compile(r"\$\{?\w+\}?")
_IDENTIFIER = re.compile(r"(?<![\w:.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?")


def metric_names(expr: str) -> set[str]:
    text = _STRINGS.sub(" ", expr)
    text = _SELECTORS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _GROUPINGS.sub(" ", text)
    text = _VARIABLES.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in _KEYWORDS:
            continue  # a function, or an aggregation written before its argument
        names.add(name)
    return names


def dashboard_exprs(dashboard: dict) -> list[tuple[str, str]]:
    """(panel title, expression) of every query in a Grafana dashboard, rows' panels included."""
    found = []

    def walk(panels: list[dict]) -> None:
        for panel in panels:
            for target in panel.get("targets", []):
                if target.get("expr"):
                    found.append((panel.get("title", ""), target["expr"]))
            walk(panel.get("panels", []))
    walk(dashboard.get("panels", []))
    return found
