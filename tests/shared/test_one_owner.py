"""One bounded LRU (shared/lru.py) and one percentile (shared/stats.py): production code writes
neither again."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "services", "migrations", "loadgen", "autellix")
LRU_BY_HAND = re.compile(r"popitem\(last=False\)|move_to_end\(")
PERCENTILE_BY_HAND = re.compile(r"def _?percentile\b|def _?pct\b|np\.(percentile|quantile)\(|statistics\.quantiles\(")
# not a bounded map: vLLM's free-block queue in the KV replay (front insertion, owners per block)
ALLOWED_LRU = {ROOT / "shared" / "lru.py", ROOT / "shared" / "core" / "belady.py"}


def _sources():
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def test_no_hand_rolled_lru():
    bad = [str(p.relative_to(ROOT)) for p in _sources() if p not in ALLOWED_LRU and LRU_BY_HAND.search(p.read_text())]
    assert not bad, f"use shared.lru.LRU: {bad}"


def test_no_second_percentile():
    bad = [str(p.relative_to(ROOT)) for p in _sources()
           if p != ROOT / "shared" / "stats.py" and PERCENTILE_BY_HAND.search(p.read_text())]
    assert not bad, f"use shared.stats.percentile: {bad}"
