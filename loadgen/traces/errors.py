"""The error raised when a trace package is not installed."""

from __future__ import annotations


class TraceUnavailable(ValueError):
    """A trace workload was asked for but its data package is missing (message says what to install)."""
