"""`autellix bench observability`'s own arithmetic: which panels have data, when top first shows a program."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

from autellix.commands._observability_check import DASHBOARD, SeenPrograms, _series_with_data, panel_report
from loadgen.bench.promql_names import dashboard_exprs, metric_names
from shared.protocol import messages as m


def test_a_panel_has_data_when_a_series_it_reads_had_a_nonzero_sample():
    exprs = dashboard_exprs(json.loads(DASHBOARD.read_text()))
    title, expr = exprs[0]
    report = panel_report(set(metric_names(expr)))
    assert title not in report["without_data"] and report["with_data"] >= 1
    assert panel_report(set())["with_data"] == 0


def test_a_counter_at_zero_is_no_data_and_a_gauge_at_zero_is_a_reading():
    text = "# TYPE a counter\na_total 0\n# TYPE b gauge\nb 0\n# TYPE c counter\nc_total 3\n"
    assert _series_with_data(text) == {"b", "c_total"}


def test_the_watcher_notes_a_program_when_top_first_shows_it():
    seen = SeenPrograms()
    asyncio.run(seen.on_message(SimpleNamespace(body=m.CallSubmitted(call_id="c1", program_id="p1", tenant="t"))))
    first = seen.first_seen_s["p1"]
    asyncio.run(seen.on_message(SimpleNamespace(body=m.CallSubmitted(call_id="c2", program_id="p1", tenant="t"))))
    assert seen.first_seen_s == {"p1": first}
