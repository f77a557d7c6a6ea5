"""What the benches share at their edges: finding an installed tool, and writing the result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from loadgen.live.real_servers import installed_binary, report


def test_a_tool_beside_this_python_is_found_first():
    assert installed_binary(Path(sys.executable).name, "unused") == str(Path(sys.executable))


def test_a_missing_tool_says_how_to_install_it():
    with pytest.raises(FileNotFoundError, match=r"no-such-tool-x is not installed: pip install it"):
        installed_binary("no-such-tool-x", "pip install it")


def test_report_records_the_command_writes_and_prints(tmp_path, capsys):
    path = tmp_path / "deep" / "r.json"
    assert report({"a": 1}, path, "python -m loadgen.bench.x", ["--seconds", "2"]) == 0
    written = json.loads(path.read_text())
    assert written == {"a": 1, "command": "python -m loadgen.bench.x --seconds 2"}
    assert json.loads(capsys.readouterr().out) == written
    assert path.read_text().endswith("\n")


def test_report_without_a_path_only_prints(capsys):
    report({"a": 1}, None, "prog", [])
    assert json.loads(capsys.readouterr().out)["command"] == "prog "
