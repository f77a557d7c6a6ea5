"""The project's layering rules, checked on the source.

Layers, lowest first: shared <- services <- migrations <- runtime <- loadgen <- autellix <- (tests, docker,
docs).
A module imports only its own top-level folder and the layers below it (function-level imports
count too); every top-level folder with Python in it has a layer; no module-level import circle;
and only the vLLM module family imports vLLM (the adapter and the block-pool retention it mixes in).
"""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAYERS = (("shared",), ("services",), ("migrations",), ("runtime",), ("loadgen",), ("autellix",),
          ("tests", "docker", "docs"))
LAYER_OF = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}
PACKAGES = ("shared", "services", "migrations", "runtime", "loadgen", "autellix")  # importable: the rest is never imported
VLLM_MODULES = {ROOT / "shared" / "engine" / name for name in ("vllm_adapter.py", "vllm_retention.py", "vllm_cpu.py",
                                                                "vllm_serving.py", "vllm_queue.py", "vllm_offload.py")}


def _imports(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _files(folder: str):
    return sorted((ROOT / folder).rglob("*.py"))


def _folders_with_python() -> set[str]:
    return {p.name for p in ROOT.iterdir()
            if p.is_dir() and not p.name.startswith(".") and not p.name.endswith(".egg-info") and any(p.rglob("*.py"))}


def test_every_top_level_folder_has_a_layer():
    unplaced = _folders_with_python() - LAYER_OF.keys()
    assert not unplaced, f"give {sorted(unplaced)} a layer in LAYERS"


def test_no_module_imports_a_higher_layer_or_a_sibling():
    for folder, rank in LAYER_OF.items():
        allowed = {f for f, r in LAYER_OF.items() if r < rank} | {folder}
        for path in _files(folder):
            bad = {name for name in _imports(path) if name in LAYER_OF and name not in allowed}
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)} (layers: {LAYERS})"


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _module_level_imports(path: pathlib.Path, modules: set[str]) -> set[str]:
    """The project modules `path` imports when it is itself imported (not inside functions)."""
    name, out = _module_name(path), set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else node.module or ""
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def test_no_import_circle():
    paths = {_module_name(p): p for folder in PACKAGES for p in _files(folder)}
    graph = {name: _module_level_imports(path, set(paths)) for name, path in paths.items()}
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            raise AssertionError("import circle: " + " -> ".join(trail[trail.index(name):] + [name]))
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, trail + [name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_only_the_adapter_imports_vllm():
    for folder in PACKAGES:
        for path in _files(folder):
            if path not in VLLM_MODULES:
                assert "vllm" not in _imports(path), f"{path.relative_to(ROOT)} imports vllm"


def test_services_named_by_module_string_live_below_the_runtime():
    """The supervisor starts each service as `python -m <module>`, a reference the import checks
    cannot see: every module the catalog names must be a runnable package of a lower layer."""
    from runtime.catalog import SERVICES

    for spec in SERVICES:
        top = spec.module.split(".")[0]
        assert LAYER_OF[top] < LAYER_OF["runtime"], f"{spec.module} is not below the runtime"
        assert (ROOT / spec.module.replace(".", "/") / "__main__.py").is_file(), f"{spec.module} has no __main__"


def _service_module_strings(path: pathlib.Path, modules: set[str]) -> list[str]:
    """A service's module spelt as a string ("services.router", f"services.{name}")."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        spelt = isinstance(node, ast.Constant) and node.value in modules
        built = (isinstance(node, ast.JoinedStr) and len(node.values) > 1 and isinstance(node.values[0], ast.Constant)
                 and str(node.values[0].value).endswith("services.") and isinstance(node.values[1], ast.FormattedValue))
        if spelt or built:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_only_the_catalog_names_service_modules():
    """Code that starts or recognises a service reads its module from `runtime/catalog.py` (`service`,
    `SERVICES`), so a renamed or added service is one row there."""
    from runtime.catalog import SERVICES

    modules = {spec.module for spec in SERVICES}
    catalog = ROOT / "runtime" / "catalog.py"
    found = [hit for folder in PACKAGES for path in _files(folder) if path != catalog
             for hit in _service_module_strings(path, modules)]
    assert not found, "service module spelt outside runtime/catalog.py:\n" + "\n".join(found)
