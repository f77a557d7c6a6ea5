"""structlog, configured once per process: JSON lines in production, console in development.

    from shared.logging import configure_logging, get_logger
    configure_logging("router", environment=settings.environment, level=settings.log_level)
    log = get_logger(engine_id="e0")            # bound fields ride on every line
    with bound(program_id=p, call_id=c): ...    # or contextvars for one task's scope

Event names are past tense (`call_routed`), fields are key/values with units in their names.
"""

from __future__ import annotations

import logging as _stdlib_logging
import sys
from typing import Any

import structlog
from structlog.contextvars import bound_contextvars

_configured = False
LEVELS = ("debug", "info", "warning", "error", "critical")


def configure_logging(service: str, environment: str = "development", level: str = "info",
                      json: bool | None = None) -> None:
    """Configure structlog and the stdlib root logger; later calls are ignored (configured once)."""
    global _configured
    if _configured:
        return
    level = level.lower()
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    use_json = environment == "production" if json is None else json
    numeric = getattr(_stdlib_logging, level.upper())
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    if use_json:
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        processors += [structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    structlog.contextvars.bind_contextvars(service=service)
    # libraries that use the stdlib (nats-py, uvicorn, alembic) go to stderr at the same level
    _stdlib_logging.basicConfig(level=max(numeric, _stdlib_logging.INFO), stream=sys.stderr,
                                format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _configured = True


def get_logger(**bound_fields: Any) -> structlog.typing.FilteringBoundLogger:
    """A logger with `program_id`, `call_id`, `engine_id` (or any key/values) bound."""
    return structlog.get_logger().bind(**bound_fields)


def bound(**fields: Any):
    """Context manager binding fields for the current task (contextvars)."""
    return bound_contextvars(**fields)
