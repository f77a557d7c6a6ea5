"""Fixtures and marks that vLLM's own test tree provides to the vendored tests."""

from __future__ import annotations

import logging

import pytest

pytestmark = pytest.mark.vllm


def pytest_configure(config):
    for mark in ("cpu_test: vLLM's mark for tests that run on CPU",
                 "skip_global_cleanup: vLLM's mark (no global cleanup after the test)"):
        config.addinivalue_line("markers", mark)


@pytest.fixture()
def caplog_vllm(caplog):
    """As vLLM's tests/conftest.py: vLLM's logger propagates to caplog at INFO."""
    logger = logging.getLogger("vllm")
    previous = logger.propagate
    logger.propagate = True
    with caplog.at_level(logging.INFO):
        yield caplog
    logger.propagate = previous
