"""Every module that calls itself pure imports only what cannot do I/O, read a clock or log.

Applied to every module of the pure core (`shared/core`: its package docstring claims it for all of
them) and to every other module whose docstring says it is pure ("the pure core", "pure Python" and
"X is a pure function of Y" describe something else; "a pure function of" alone is the module's claim). The check is an allow list and recursive: a pure
module may import the standard-library modules below and project modules that pass this same
check, through any depth. A package's `__init__` counts only when a name is taken from it.
"""

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "services", "migrations", "loadgen", "autellix", "runtime")
PURE_PACKAGES = ("shared/core",)
ALLOWED = {"__future__", "abc", "bisect", "collections", "collections.abc", "copy", "dataclasses", "enum",
           "functools", "hashlib", "heapq", "itertools", "math", "numbers", "operator", "re", "statistics",
           "types", "typing"}
NOT_A_CLAIM = re.compile(r"pure[\s-]+(core|python|llm)|\b(is|are)\s+a\s+pure\s+function\b|the\s+pure\b|pure\s+`",
                         re.I)
CLAIM = re.compile(r"\bpure\b", re.I)


def _name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


MODULES = {_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def _is_claim(doc: str) -> bool:
    return bool(CLAIM.search(NOT_A_CLAIM.sub("", doc)))


def _claims_purity(path: pathlib.Path) -> bool:
    return _is_claim(ast.get_docstring(ast.parse(path.read_text())) or "")


def _pure_modules() -> list[str]:
    names = {n for n, p in MODULES.items()
             if _claims_purity(p) or any(p.is_relative_to(ROOT / d) for d in PURE_PACKAGES)}
    return sorted(names)


def _imports(name: str) -> set[str]:
    """What the module imports (anywhere in it): project modules by their file, others by name."""
    path = MODULES[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = (".".join(package[:len(package) - node.level + 1] + [node.module or ""]).strip(".")
                    if node.level else node.module or "")
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return out


def _problems(name: str, trail: tuple[str, ...], checked: dict[str, list[str]]) -> list[str]:
    if name in checked:
        return checked[name]
    checked[name] = []  # a circle adds nothing new
    found = []
    for imported in sorted(_imports(name)):
        project = imported
        while project and project not in MODULES:
            project = project.rpartition(".")[0]
        if project:
            found += _problems(project, trail + (name,), checked)
        elif imported not in ALLOWED:
            found.append(" -> ".join(trail + (name, imported)))
    checked[name] = found
    return found


def test_the_claim_finder_sees_the_core_and_the_modules_that_say_so():
    pure = _pure_modules()
    for expected in ("shared.core.program", "shared.core.mlfq", "shared.lru", "shared.stats",
                     "shared.engine.program_sched", "services.process_table.fold", "loadgen.bench.scaling_model"):
        assert expected in pure
    assert "runtime" not in pure  # "the pure core never imports it" is no claim


def test_a_pure_function_is_a_claim_unless_said_of_something_else():
    assert _is_claim("What it predicts: a pure function of the measured costs.")
    assert _is_claim("Pure function of the config.")
    assert not _is_claim("The words are a pure function of the segment id.")
    assert not _is_claim("A run is a pure\nfunction of its inputs; the pure core's ledger.")


def test_pure_modules_import_only_the_allow_list_at_any_depth():
    checked: dict[str, list[str]] = {}
    problems = sorted({p for name in _pure_modules() for p in _problems(name, (), checked)})
    assert not problems, "impure imports:\n" + "\n".join(problems)
