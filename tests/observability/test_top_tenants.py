"""`autellix top`'s tenants table shows the controller's fair-share decision."""

from __future__ import annotations

from rich.console import Console

from autellix.commands._top_view import TopView
from shared.protocol import messages as m


def _screen(view: TopView) -> str:
    console = Console(width=200, record=True)
    console.print(view.render())
    return console.export_text()


def test_the_tenants_table_marks_the_tenant_behind_and_shows_recent_service():
    view = TopView()
    for tenant in ("heavy", "light"):
        view.on_message(m.CallSubmitted(call_id=f"c-{tenant}", program_id=f"p-{tenant}", tenant=tenant))
    assert "behind" not in _screen(view)
    view.on_message(m.TenantShares(classes={"heavy": 1}, service_s={"heavy": 12.5, "light": 1.25}))
    rows = {line.split("│")[1].strip(): line for line in _screen(view).splitlines() if line.count("│") > 4}
    assert "behind" in rows["heavy"] and "12.50" in rows["heavy"]
    assert "fair" in rows["light"] and "1.25" in rows["light"]
