"""Settings come from the environment and are validated; logging is configured once."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pydantic import ValidationError

from shared.settings import DatabaseSettings, MeshSettings


def test_defaults_and_environment(monkeypatch):
    monkeypatch.setenv("NATS_URL", "nats://10.0.0.5:4222,nats://10.0.0.6:4222")
    monkeypatch.setenv("AUTELLIX_ENV", "production")
    monkeypatch.setenv("LOG_LEVEL", "WARNING")
    s = MeshSettings()
    assert s.nats_url.startswith("nats://10.0.0.5") and s.environment == "production"
    assert s.log_level == "warning" and s.log_json  # production logs JSON by default
    monkeypatch.setenv("LOG_FORMAT", "console")
    assert not MeshSettings().log_json


@pytest.mark.parametrize("var, value", [
    ("NATS_URL", "http://localhost:4222"),
    ("NATS_URL", "localhost:4222"),
    ("AUTELLIX_ENV", "staging"),
    ("LOG_LEVEL", "loud"),
    ("NATS_CONNECT_TIMEOUT_S", "0"),
    ("AUDIT_MAX_BYTES", "-1"),
])
def test_bad_values_are_refused(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(ValidationError):
        MeshSettings()


def test_database_url_must_be_asyncpg_and_name_a_database(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://postgres@/autellix?host=/tmp/pg")
    assert DatabaseSettings().database_url.endswith("host=/tmp/pg")
    for bad in ("mysql://x/y", "postgresql+asyncpg://postgres@/"):
        monkeypatch.setenv("DATABASE_URL", bad)
        with pytest.raises(ValidationError):
            DatabaseSettings()
    monkeypatch.delenv("DATABASE_URL")
    with pytest.raises(ValidationError):
        DatabaseSettings()


def _stderr_of(code: str) -> str:
    """Run in a fresh interpreter: logging is configured once per process."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stderr


def _lines_of(code: str) -> list[dict]:
    return [json.loads(line) for line in _stderr_of(code).strip().splitlines()]


def test_json_logs_carry_bound_ids():
    line = _lines_of("from shared.logging import configure_logging, get_logger, bound\n"
                     "configure_logging('router', environment='production')\n"
                     "configure_logging('ignored', environment='development')\n"
                     "with bound(program_id='p1'):\n"
                     "    get_logger(engine_id='e0').info('call_routed', call_id='c1', wait_s=0.5)\n")[-1]
    assert line["event"] == "call_routed" and line["service"] == "router"
    assert (line["program_id"], line["engine_id"], line["call_id"]) == ("p1", "e0", "c1")
    assert line["level"] == "info" and "timestamp" in line


def test_a_hot_line_writes_what_structlog_writes():
    """The access log's fast writer: the same keys in the same order and the same values as
    structlog's chain, context fields merged, a level below the configured one silent."""
    lines = _lines_of(
        "from shared.logging import configure_logging, get_logger, bound, HotLine\n"
        "hot, quiet = HotLine('http_request'), HotLine('http_request', 'debug')\n"  # made before configuring
        "configure_logging('session_api', environment='production')\n"
        "with bound(tenant='acme'):\n"
        "    get_logger().info('http_request', status=200, duration_ms=1.5, model='m', trace_id='')\n"
        "    hot(status=200, duration_ms=1.5, model='m', trace_id='')\n"
        "    quiet(status=200)\n")
    assert len(lines) == 2
    by_structlog, by_hot = lines
    assert list(by_hot) == list(by_structlog)
    assert {k: v for k, v in by_hot.items() if k != "timestamp"} == \
        {k: v for k, v in by_structlog.items() if k != "timestamp"}
    assert by_hot["timestamp"].endswith("Z") and by_hot["tenant"] == "acme"


def test_a_hot_line_outside_json_mode_is_structlogs_own_call():
    from shared.logging import HotLine

    err = _stderr_of("from shared.logging import configure_logging, HotLine\n"
                     "configure_logging('session_api', environment='development', level='info')\n"
                     "HotLine('http_request')(status=404)\n")
    assert "http_request" in err and "status" in err and "404" in err
    assert not err.lstrip().startswith("{")
    with pytest.raises(ValueError, match="log level must be one of"):
        HotLine("x", "loud")
