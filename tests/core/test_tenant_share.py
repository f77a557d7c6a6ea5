"""Tenant fair share (shared/core/tenant_share.py): the charge follows the tenant, not its ids."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core.policy import SchedulingPolicy
from shared.core.service_class import TENANT_RANK_SPAN, outer_class
from shared.core.tenant_share import (
    MAX_TENANT_CLASS,
    OVER_ENTITLED_CLASS,
    TenantServiceLedger,
    TenantShareConfig,
    parse_tenant_weights,
    tenant_classes,
)
from shared.engine.program_meta import ProgramMeta
from shared.engine.program_sched import ProgramScheduleState, SchedulerSettings


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdef"), st.floats(0.0, 1e4), max_size=6),
       st.dictionaries(st.sampled_from("abcdef"), st.floats(0.1, 10.0), max_size=6))
def test_some_active_tenant_is_never_behind_and_idle_tenants_are_never_listed(recent, weights):
    classes = tenant_classes(recent, TenantShareConfig(weights=weights))
    active = {t for t, s in recent.items() if s > 0}
    assert set(classes) <= active
    assert all(OVER_ENTITLED_CLASS <= c <= MAX_TENANT_CLASS for c in classes.values())
    shares = {t: recent[t] / TenantShareConfig(weights=weights).weight_of(t) for t in classes}
    for a in classes:  # further over its entitlement: never an earlier class
        for b in classes:
            if shares[a] > shares[b]:
                assert classes[a] >= classes[b]
    if active:
        assert active - set(classes), "shares sum to 1: someone is within its entitlement"


def test_the_heavier_of_two_equal_tenants_goes_behind_and_a_tie_keeps_both_ahead():
    cfg = TenantShareConfig(tolerance=0.05)
    assert tenant_classes({"heavy": 3.0, "light": 1.0}, cfg) == {"heavy": OVER_ENTITLED_CLASS}
    assert tenant_classes({"a": 1.0, "b": 1.04}, cfg) == {}
    assert tenant_classes({"alone": 9.0}, cfg) == {}
    weighted = TenantShareConfig(weights={"big": 3.0})
    assert tenant_classes({"big": 3.0, "small": 1.0}, weighted) == {}  # exactly its 75% share


def test_of_two_heavy_tenants_the_heavier_goes_last_and_near_equals_share_a_class():
    cfg = TenantShareConfig(tolerance=0.05)
    # entitled 1/4 each: shares 0.56 (2.2x), 0.375 (1.5x), light ones below theirs
    assert tenant_classes({"heavier": 30.0, "heavy": 20.0, "l1": 2.0, "l2": 1.5}, cfg) == {"heavier": 2, "heavy": 1}
    assert tenant_classes({"a": 10.0, "b": 11.0, "l1": 1.0, "l2": 1.0, "l3": 1.0, "l4": 1.0}, cfg) == {"a": 2, "b": 2}


@settings(max_examples=100, deadline=None)
@given(st.floats(0.01, 100.0), st.lists(st.floats(0.0, 50.0), min_size=1, max_size=10))
def test_counters_decay_and_never_grow_without_service(service, gaps):
    ledger = TenantServiceLedger(TenantShareConfig(half_life_s=10.0))
    ledger.charge("t", service, 0.0)
    now, last = 0.0, service
    for gap in gaps:
        now += gap
        value = ledger.recent(now).get("t", 0.0)
        assert value <= last + 1e-12
        last = value
    assert math.isclose(ledger.recent(now).get("t", 0.0), service * 0.5 ** (now / 10.0), rel_tol=1e-9) or last < 1e-4


def test_bad_charges_are_no_service_and_the_tenant_count_is_bounded():
    ledger = TenantServiceLedger(TenantShareConfig(max_tenants=3))
    for bad in (float("nan"), float("inf"), -1.0, 0.0):
        ledger.charge("x", bad, 0.0)
    assert ledger.recent(0.0) == {}
    for i, tenant in enumerate("abcde"):
        ledger.charge(tenant, 1.0 + i, 0.0)
    assert set(ledger.recent(0.0)) == {"c", "d", "e"}


@pytest.mark.parametrize("raw, problem", [("a", "tenant=weight"), ("a=0", "> 0"), ("=2", "tenant=weight"),
                                          ("a=nan", "finite"), ("a=x", "finite")])
def test_malformed_weights_are_refused_with_the_setting_name(raw, problem):
    with pytest.raises(ValueError, match="TENANT_WEIGHTS") as err:
        parse_tenant_weights(raw)
    assert problem.split()[0] in str(err.value) or "finite" in str(err.value)


def test_weights_parse():
    assert parse_tenant_weights("") == {}
    assert parse_tenant_weights(" acme=2, beta=0.5 ") == {"acme": 2.0, "beta": 0.5}


@given(st.integers(-3, 3), st.integers(0, TENANT_RANK_SPAN - 1), st.integers(-3, 3), st.integers(0, TENANT_RANK_SPAN - 1))
def test_outer_class_orders_client_priority_first_then_tenant_rank(p1, r1, p2, r2):
    assert (outer_class(p1, r1) < outer_class(p2, r2)) == ((p1, r1) < (p2, r2))


def test_a_behind_tenant_call_queues_after_every_other_tenant_call_whatever_its_program_level():
    state = ProgramScheduleState(SchedulerSettings(SchedulingPolicy("plas")))
    state.directory.ledger("heavy-fresh")  # a brand-new program of the heavy tenant: level 0
    light = state.directory.ledger("light-old")
    light.service_s = 50.0  # the light tenant's long program: a low level
    fresh = state.admit("c1", ProgramMeta("heavy-fresh"), 0.0, 10, 0.0, tenant="heavy")
    old = state.admit("c2", ProgramMeta("light-old"), 0.0, 10, 0.0, tenant="light")
    assert state.full_key(fresh) < state.full_key(old)  # no tenant order: the fresh program first
    changed = state.set_tenant_ranks({"heavy": OVER_ENTITLED_CLASS}, missing_rank=0)
    assert changed == [fresh]
    assert state.full_key(old) < state.full_key(fresh)
    assert state.beats_worst(old, [fresh])  # and it may displace the heavy tenant's runner
    late = state.admit("c3", ProgramMeta("heavy-fresh"), 0.0, 10, 0.0, tenant="heavy")
    assert late.outer == fresh.outer  # admitted after the ranks: ranked at once
    assert state.set_tenant_ranks(None) == [fresh, late]
