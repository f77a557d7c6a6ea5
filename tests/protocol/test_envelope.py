"""Per-publisher sequences: gaps, duplicates and late arrivals are told apart."""

from hypothesis import given
from hypothesis import strategies as st

from shared.protocol import Publisher, SequenceTracker, SeqVerdict, decode, make_publisher_id
from shared.protocol import messages as m


def test_publisher_numbers_from_one():
    pub = Publisher("p")
    seqs = [decode(pub.encode(m.OkReply())).envelope.seq for _ in range(3)]
    assert seqs == [1, 2, 3] and pub.last_seq == 3


def test_publisher_ids_name_one_incarnation():
    a, b = make_publisher_id("router"), make_publisher_id("router")
    assert a != b and a.startswith("router.")


def test_tracker_verdicts():
    t = SequenceTracker()
    assert t.observe("a", 1).verdict is SeqVerdict.NEW
    assert t.observe("a", 2).verdict is SeqVerdict.NEW
    assert t.observe("a", 2).verdict is SeqVerdict.DUPLICATE
    gap = t.observe("a", 6)
    assert gap.verdict is SeqVerdict.GAP and gap.missing == 3 and t.missing("a") == 3
    assert t.observe("a", 4).verdict is SeqVerdict.LATE
    assert t.observe("a", 4).verdict is SeqVerdict.DUPLICATE
    assert t.missing("a") == 2
    assert t.observe("b", 10).verdict is SeqVerdict.NEW  # publishers are independent
    t.forget("a")
    assert t.observe("a", 1).verdict is SeqVerdict.NEW


def test_tracker_bounds_its_memory():
    t = SequenceTracker(max_missing=10)
    t.observe("a", 1)
    assert t.observe("a", 1_000_000).missing == 999_998
    assert t.missing("a") == 10


@given(st.lists(st.integers(1, 60), min_size=1, max_size=200))
def test_tracker_counts_every_distinct_number_once(seqs):
    """Heard from the publisher's first message on, in any order, with any duplicates: each distinct
    number is accepted exactly once (NEW, GAP or LATE), every repeat is a DUPLICATE. (A reader that
    joins later takes its first message as the baseline; older numbers read as duplicates.)"""
    seqs = [1, *seqs]
    t = SequenceTracker()
    verdicts = [t.observe("p", s).verdict for s in seqs]
    accepted = [s for s, v in zip(seqs, verdicts, strict=True) if v is not SeqVerdict.DUPLICATE]
    assert sorted(accepted) == sorted(set(seqs))
    assert t.missing("p") == len(set(range(1, max(seqs) + 1)) - set(seqs))
