"""Tenant charges from engines' counters (controller) and the classes an engine applies."""

from __future__ import annotations

import math

import pytest

from services.controller.tenant_view import TenantView
from services.engine_agent.tenant_share import EngineTenantShare
from shared.core.tenant_share import MAX_TENANT_CLASS, OVER_ENTITLED_CLASS, TenantShareConfig
from shared.protocol import messages as m


def _snap(engine: str, **counters: float) -> m.EngineQueueSnapshot:
    return m.EngineQueueSnapshot(engine_id=engine, tenant_service_s=dict(counters))


def test_each_snapshot_charges_the_difference_and_a_restarted_engine_counts_from_zero():
    view = TenantView(TenantShareConfig(half_life_s=1e9))  # no decay: exact sums
    view.on_snapshot(_snap("e0", heavy=3.0, light=1.0), 0.0)
    view.on_snapshot(_snap("e0", heavy=5.0, light=1.0), 1.0)  # +2 heavy
    view.on_snapshot(_snap("e1", heavy=1.0), 1.0)  # another engine adds its own
    view.on_snapshot(_snap("e0", heavy=0.5), 2.0)  # e0 restarted: 0.5 new
    recent = view.ledger.recent(2.0)
    assert recent["heavy"] == pytest.approx(3.0 + 2.0 + 1.0 + 0.5)
    assert recent["light"] == pytest.approx(1.0)
    shares = view.shares(2.0, valid_for_s=2.0)
    assert shares.classes == {"heavy": OVER_ENTITLED_CLASS} and shares.valid_for_s == 2.0


@pytest.mark.parametrize("counters", [{"t": math.nan}, {"t": -1.0}, {"t": math.inf}, {"t": 2e9}, {"": 1.0},
                                      {"x" * 300: 1.0}, {f"t{i}": 1.0 for i in range(10_001)}])
def test_a_malformed_snapshot_charges_nobody(counters):
    view = TenantView(TenantShareConfig())
    view.on_snapshot(_snap("e0", ok=1.0), 0.0)
    assert view.on_snapshot(m.EngineQueueSnapshot(engine_id="e0", tenant_service_s=counters), 0.0) is not None
    assert view.num_refused == 1
    assert set(view.ledger.recent(0.0)) == {"ok"}
    view.on_snapshot(_snap("e0", ok=2.0), 0.0)  # the refused one did not reset the engine's baseline
    assert view.ledger.recent(0.0)["ok"] == pytest.approx(2.0)


def test_an_engine_applies_valid_classes_refuses_malformed_ones_and_lets_stale_ones_lapse():
    share = EngineTenantShare()
    assert share.on_shares(m.TenantShares(classes={"heavy": 1}, valid_for_s=2.0), now_s=0.0) == {"heavy": 1}
    assert share.on_shares(m.TenantShares(classes={"heavy": 1}, valid_for_s=2.0), now_s=1.0) is None  # unchanged
    assert share.class_of("heavy") == 1 and share.class_of("light") == 0
    for bad in ({"heavy": MAX_TENANT_CLASS + 1}, {"heavy": -1}, {"": 1}, {"heavy": True}):
        with pytest.raises(ValueError):
            share.on_shares(m.TenantShares(classes=bad, valid_for_s=2.0), now_s=1.0)
    with pytest.raises(ValueError, match="valid_for_s"):
        share.on_shares(m.TenantShares(classes={}, valid_for_s=math.nan), now_s=1.0)
    assert share.class_of("heavy") == 1  # refusals changed nothing
    assert share.lapse(now_s=2.5) is None  # renewed at 1.0: holds until 3.0
    assert share.lapse(now_s=3.0) == {} and share.class_of("heavy") == 0


def test_an_engine_counts_each_tenant_and_a_sessionless_call_without_tenant_as_default():
    share = EngineTenantShare(max_tenants=2)
    share.charge("a", 1.0)
    share.charge("a", 0.5)
    share.charge("", 2.0)
    share.charge("b", math.nan)
    assert share.counters() == {"a": 1.5, "default": 2.0}


def test_malformed_fair_share_settings_refuse_to_start_with_the_variable_named():
    from pydantic import ValidationError

    from services.controller.settings import ControllerSettings

    for bad in ({"tenant_weights": "acme"}, {"tenant_weights": "acme=-1"}, {"tenant_half_life_s": 0},
                {"tenant_share_tolerance": -0.1}):
        with pytest.raises(ValidationError) as err:
            ControllerSettings(**bad)
        assert next(iter(bad)) in str(err.value)
    assert ControllerSettings(tenant_weights="acme=2").tenant_share_config().weight_of("acme") == 2.0
