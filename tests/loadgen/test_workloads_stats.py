"""`autellix workload-stats` and the statistics behind it."""

from __future__ import annotations

from autellix.cli import main
from loadgen.workloads import make_programs
from loadgen.workloads.stats import new_prompt_tokens, shared_prompt_tokens, workload_rows


def test_rows_for_a_chain():
    programs = make_programs("react", 30, seed=1)
    rows = {r.metric: r for r in workload_rows(programs)}
    assert rows["threads/program"].max == 1
    assert rows["cross-program shared tokens/call"].p50 == 5000
    for p in programs:
        assert all(n == 5000 for n in shared_prompt_tokens(p))
        assert new_prompt_tokens(p)[0] == p.calls[0].prompt_tokens - 5000


def test_command_writes_markdown(tmp_path, capsys):
    out = tmp_path / "stats.md"
    assert main(["workload-stats", "--workload", "mcts", "--programs", "20", "--seed", "1", "--out", str(out)]) == 0
    text = out.read_text()
    assert "## mcts" in text and "159.7 mean" in text and "| calls/program |" in text
    assert text == capsys.readouterr().out


def test_command_bad_input(capsys):
    assert main(["workload-stats", "--workload", "nope", "--out", "-"]) == 2
    assert "valid" in capsys.readouterr().err
    assert main(["workload-stats", "--programs", "0", "--out", "-"]) == 2
