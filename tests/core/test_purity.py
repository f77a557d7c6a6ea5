"""The pure core imports no I/O, clock, logging or async machinery."""

import ast
import pathlib

FORBIDDEN = {"nats", "sqlalchemy", "fastapi", "vllm", "asyncio", "time", "logging", "structlog",
             "socket", "os", "random", "datetime", "services", "loadgen"}


def test_core_imports_nothing_impure():
    core = pathlib.Path(__file__).resolve().parents[2] / "shared" / "core"
    for path in core.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"
