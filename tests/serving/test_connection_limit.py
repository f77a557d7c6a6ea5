"""The API's connection limit: by default what the open-file limit leaves room for (a flood gets
uvicorn's 503 instead of accept() failing with EMFILE); MAX_CONNECTIONS sets it, 0 turns it off."""

from __future__ import annotations

import resource

from services.session_api.main import FDS_KEPT, MIN_CONNECTIONS, connection_limit, uvicorn_options
from services.session_api.settings import SessionApiSettings


def test_the_default_follows_the_open_file_limit():
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    expected = None if soft == resource.RLIM_INFINITY else max(MIN_CONNECTIONS, soft - FDS_KEPT)
    assert connection_limit(None) == expected
    assert uvicorn_options(SessionApiSettings())["limit_concurrency"] == expected


def test_a_setting_wins_and_zero_is_no_limit(monkeypatch):
    monkeypatch.setenv("MAX_CONNECTIONS", "300")
    assert uvicorn_options(SessionApiSettings())["limit_concurrency"] == 300
    assert connection_limit(0) is None
