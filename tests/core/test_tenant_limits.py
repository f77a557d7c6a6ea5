"""The shared tenant-limit ledger (shared/core/tenant_limits.py): any interleaving of several
workers' batches, releases (some lost), unread answers and snapshots."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.core.tenant_limits import (
    ADMITTED,
    RATE_LIMITED,
    TOO_MANY_IN_FLIGHT,
    Limits,
    TenantLimitLedger,
)

WORKERS = ("a", "b", "c")
TENANTS = ("t1", "t2")

ops = st.lists(st.one_of(
    st.tuples(st.just("admit"), st.sampled_from(WORKERS), st.lists(st.sampled_from(TENANTS), min_size=1, max_size=6)),
    st.tuples(st.just("read"), st.sampled_from(WORKERS)),  # the worker reads its oldest unread answer
    st.tuples(st.just("release"), st.sampled_from(WORKERS), st.sampled_from(TENANTS), st.booleans()),  # lost?
    st.tuples(st.just("snapshot"), st.sampled_from(WORKERS)),
    st.tuples(st.just("tick"), st.floats(0.0, 0.5)),
), max_size=80)


class World:
    """The truth: what each worker has admitted and not released, answers it has not read yet."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.ledger = TenantLimitLedger()
        self.now_s = 0.0
        self.read = {w: {t: 0 for t in TENANTS} for w in WORKERS}
        self.unread: dict[str, list[tuple[int, dict[str, int]]]] = {w: [] for w in WORKERS}
        self.seq = {w: 0 for w in WORKERS}
        self.admitted_total = 0
        self.lost_releases = False

    def true_in_flight(self, tenant: str) -> int:
        return sum(self.read[w][tenant] + sum(g.get(tenant, 0) for _, g in self.unread[w]) for w in WORKERS)

    def apply(self, op) -> None:
        kind = op[0]
        if kind == "admit":
            _, w, tenants = op
            self.seq[w] += 1
            verdicts = self.ledger.admit(w, self.seq[w], tenants, self.limits, self.now_s)
            granted: dict[str, int] = {}
            for tenant, v in zip(tenants, verdicts, strict=True):
                assert v.refused in (ADMITTED, RATE_LIMITED, TOO_MANY_IN_FLIGHT)
                if v.refused == ADMITTED:
                    granted[tenant] = granted.get(tenant, 0) + 1
                    self.admitted_total += 1
                else:
                    assert v.retry_after_s > 0
            self.unread[w].append((self.seq[w], granted))
        elif kind == "read" and self.unread[op[1]]:
            _, grants = self.unread[op[1]].pop(0)
            for tenant, n in grants.items():
                self.read[op[1]][tenant] += n
        elif kind == "release":
            _, w, tenant, lost = op
            if self.read[w][tenant] > 0:
                self.read[w][tenant] -= 1
                if lost:
                    self.lost_releases = True
                else:
                    self.ledger.release(w, {tenant: 1}, self.now_s)
        elif kind == "snapshot":
            w = op[1]
            self.ledger.reconcile(w, {t: n for t, n in self.read[w].items() if n}, [s for s, _ in self.unread[w]],
                                  self.now_s)
        elif kind == "tick":
            self.now_s += op[1]


@settings(max_examples=300, deadline=None)
@given(ops, st.integers(1, 8), st.sampled_from([0.0, 2.0, 50.0]), st.integers(1, 6))
def test_in_flight_never_passes_the_cap_and_the_ledger_never_counts_less(ops, cap, rate, burst):
    world = World(Limits(cap, rate, burst))
    for op in ops:
        world.apply(op)
        for tenant in TENANTS:
            truth = world.true_in_flight(tenant)
            assert truth <= cap  # over every worker together
            if world.lost_releases:
                assert world.ledger.in_flight(tenant) >= truth  # a lost release only refuses more
            else:
                assert world.ledger.in_flight(tenant) == truth


@settings(max_examples=200, deadline=None)
@given(ops)
def test_a_snapshot_of_every_worker_makes_the_ledger_exact(ops):
    world = World(Limits(6, 0.0, 1))
    for op in ops:
        world.apply(op)
    for w in WORKERS:
        world.apply(("snapshot", w))
    for tenant in TENANTS:
        assert world.ledger.in_flight(tenant) == world.true_in_flight(tenant)


@settings(max_examples=200, deadline=None)
@given(ops, st.sampled_from([1.0, 10.0]), st.integers(1, 5))
def test_admissions_never_beat_the_bucket(ops, rate, burst):
    world = World(Limits(1_000_000, rate, burst))
    for op in ops:
        world.apply(op)
    assert world.admitted_total <= len(TENANTS) * (burst + rate * world.now_s) + 1e-9


def test_a_silent_worker_takes_its_calls_with_it():
    ledger = TenantLimitLedger()
    limits = Limits(2, 0.0, 1)
    assert [v.refused for v in ledger.admit("a", 1, ["t", "t"], limits, 0.0)] == [ADMITTED, ADMITTED]
    refused = ledger.admit("b", 1, ["t"], limits, 1.0)[0]
    assert (refused.refused, refused.in_flight) == (TOO_MANY_IN_FLIGHT, 2)
    ledger.admit("b", 2, ["u"], limits, 6.0)  # b stays heard from
    assert ledger.forget_silent(6.5, 5.0) == ["a"]
    assert ledger.in_flight("t") == 0
    assert ledger.admit("b", 3, ["t"], limits, 6.5)[0].refused == ADMITTED


def test_rate_refusal_says_when_a_token_is_back_and_a_refilled_bucket_is_forgotten():
    ledger = TenantLimitLedger()
    limits = Limits(100, 4.0, 2)
    assert [v.refused for v in ledger.admit("a", 1, ["t"] * 3, limits, 0.0)] == [ADMITTED, ADMITTED, RATE_LIMITED]
    assert ledger.admit("a", 2, ["t"], limits, 0.0)[0].retry_after_s == pytest.approx(0.25)
    assert ledger.admit("a", 3, ["t"], limits, 0.25)[0].refused == ADMITTED
    ledger.forget_silent(10.0, 60.0, limits)
    assert ledger._buckets == {}


@pytest.mark.parametrize("bad", [dict(max_in_flight=0, rate_per_s=1.0, burst=1),
                                 dict(max_in_flight=1, rate_per_s=float("nan"), burst=1),
                                 dict(max_in_flight=1, rate_per_s=-1.0, burst=1),
                                 dict(max_in_flight=1, rate_per_s=1.0, burst=0)])
def test_limits_refuse_nonsense(bad):
    with pytest.raises(ValueError, match="limits need"):
        Limits(**bad)
