"""The project's layering rules, checked on the source: shared <- services <- loadgen <- autellix,
and only the vLLM module family imports vLLM (the adapter and the block-pool retention it mixes in)."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
VLLM_MODULES = {ROOT / "shared" / "engine" / name for name in ("vllm_adapter.py", "vllm_retention.py", "vllm_cpu.py",
                                                                "vllm_serving.py", "vllm_queue.py")}


def _imports(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _files(package: str):
    return sorted((ROOT / package).rglob("*.py"))


def test_lower_layers_never_import_higher_ones():
    forbidden = {"shared": {"services", "loadgen", "autellix"}, "services": {"loadgen", "autellix"},
                 "loadgen": {"autellix"}}
    for package, higher in forbidden.items():
        for path in _files(package):
            bad = _imports(path) & higher
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_only_the_adapter_imports_vllm():
    for package in ("shared", "services", "loadgen", "autellix", "migrations"):
        for path in _files(package):
            if path not in VLLM_MODULES:
                assert "vllm" not in _imports(path), f"{path.relative_to(ROOT)} imports vllm"
