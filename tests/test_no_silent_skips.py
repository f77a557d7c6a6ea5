"""No test skips silently: vLLM's absence goes through tests/vllm/needs_vllm.py (a failure under
AUTELLIX_REQUIRE_VLLM=1, as CI runs), and every other import skip states its reason."""

import ast
import pathlib

TESTS = pathlib.Path(__file__).resolve().parent


def _importorskips():
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "importorskip"):
                yield path.relative_to(TESTS), node


def test_vllm_is_never_import_skipped():
    bad = [f"{p}:{n.lineno}" for p, n in _importorskips()
           if n.args and isinstance(n.args[0], ast.Constant) and str(n.args[0].value).startswith("vllm")]
    assert not bad, f"use tests.vllm.needs_vllm.require_vllm() instead: {bad}"


def test_every_import_skip_states_its_reason():
    bad = [f"{p}:{n.lineno}" for p, n in _importorskips() if not any(k.arg == "reason" for k in n.keywords)]
    assert not bad, f"give importorskip a reason=: {bad}"
