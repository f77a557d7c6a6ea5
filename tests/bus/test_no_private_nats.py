"""Production code talks to nats-py through its public API only: a private method (`nc._send_command`,
`js._jsm`...) can change in any release, and the one pull consumer (`shared/bus/pull.py`) needs none."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT_NAMES = {"nc", "js", "_nc", "_js", "client", "_client"}  # what the code calls a nats-py client


def _private_client_uses(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        owner = node.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if name in CLIENT_NAMES:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} .{node.attr}")
    return found


def test_no_private_nats_py_calls_in_production_code() -> None:
    files = [p for top in ("shared", "services", "runtime", "autellix", "loadgen") for p in sorted((ROOT / top).rglob("*.py"))]
    assert files
    uses = [use for p in files for use in _private_client_uses(p)]
    assert uses == [], "nats-py private API used:\n" + "\n".join(uses)
