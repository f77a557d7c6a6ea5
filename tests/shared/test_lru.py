"""The one bounded LRU, against a list model: what it holds, in which order, what it evicts."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.lru import LRU

ops = st.lists(st.tuples(st.sampled_from(["put", "get", "touch", "pop"]), st.integers(0, 9), st.integers()),
               max_size=80)


@given(st.integers(0, 6), ops)
def test_matches_a_list_model(capacity, script):
    lru: LRU[int, int] = LRU(capacity)
    model: list[tuple[int, int]] = []  # least recent first
    for op, key, value in script:
        held = dict(model)
        if op == "put":
            model = [kv for kv in model if kv[0] != key] + [(key, value)]
            expected_evicted = model[:max(0, len(model) - capacity)]
            model = model[len(expected_evicted):]
            assert lru.put(key, value) == expected_evicted
        elif op == "get":
            assert lru.get(key) == held.get(key)
        elif op == "touch":
            assert lru.touch(key) == held.get(key)
            if key in held:
                model = [kv for kv in model if kv[0] != key] + [(key, held[key])]
        else:
            assert lru.pop(key) == held.get(key)
            model = [kv for kv in model if kv[0] != key]
        assert list(lru.items()) == model
        assert lru.oldest() == (model[0] if model else None)
        assert len(lru) <= capacity


def test_capacity_change_applies_at_the_next_put():
    lru = LRU(4)
    for i in range(4):
        lru.put(i, None)
    lru.capacity = 2
    assert len(lru) == 4
    assert lru.put(9, None) == [(0, None), (1, None), (2, None)]
    assert list(lru) == [3, 9]


def test_negative_capacity_is_refused():
    with pytest.raises(ValueError):
        LRU(-1)
