"""Prefix-cache block hashes: a hash chain over the content of every full KV block.

A block's content is the list of (segment id, offset, length) pieces covering its tokens; its hash
folds in the previous block's hash, so equal hashes mean equal prefixes (as vLLM's block hashes).
The chain is built incrementally: a call hashes its prompt once at submit and its output tokens as
they fill blocks; a memo keyed by (chain state, segment) lets a program's next call reuse the work
for the history it repeats.
"""

from __future__ import annotations

ROOT_HASH = 0x5EED


class HashChain:
    __slots__ = ("block_size", "hashes", "prev", "pieces", "fill", "tokens")

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.hashes: list[int] = []  # one per full block, in order
        self.prev = ROOT_HASH
        self.pieces: list[tuple[str, int, int]] = []  # the partial block's content
        self.fill = 0
        self.tokens = 0

    def extend(self, segment_id: str, start: int, num_tokens: int) -> None:
        """Append tokens [start, start + num_tokens) of a segment."""
        bs = self.block_size
        pos, end = start, start + num_tokens
        pieces, fill, prev, hashes = self.pieces, self.fill, self.prev, self.hashes
        while pos < end:
            if fill == 0 and end - pos >= bs:
                # whole aligned blocks of one segment: the common case for long histories
                while end - pos >= bs:
                    prev = hash((prev, ((segment_id, pos, bs),)))
                    hashes.append(prev)
                    pos += bs
                continue
            take = min(bs - fill, end - pos)
            if pieces and pieces[-1][0] == segment_id and pieces[-1][1] + pieces[-1][2] == pos:
                last = pieces[-1]
                pieces[-1] = (segment_id, last[1], last[2] + take)  # contiguous: one canonical piece
            else:
                pieces.append((segment_id, pos, take))
            fill += take
            pos += take
            if fill == bs:
                prev = hash((prev, tuple(pieces)))
                hashes.append(prev)
                pieces = []
                fill = 0
        self.pieces, self.fill, self.prev = pieces, fill, prev
        self.tokens += num_tokens


class ChainMemo:
    """Per-segment memo: (chain state, segment) -> (state after, block hashes added).

    Bounded: cleared when it grows past `max_entries` (a cache, never a source of truth).
    """

    def __init__(self, block_size: int, max_entries: int = 50_000, max_hashes: int = 2_000_000) -> None:
        self.block_size = block_size
        self.max_entries = max_entries
        self.max_hashes = max_hashes  # about 100 MB of stored hashes at most
        self._memo: dict[tuple, tuple] = {}
        self._num_hashes = 0

    def chain_for(self, segments: tuple[tuple[str, int], ...], remember_last: bool = True) -> HashChain:
        """`remember_last=False`: the last segment is not memoised (a one-call program's prompt ends
        in content no later call repeats; memoising it grew the memo by one entry per call)."""
        chain = HashChain(self.block_size)
        memo = self._memo
        last = len(segments) - 1
        for k, (seg_id, n) in enumerate(segments):
            if n <= 0:
                continue
            pieces = tuple(chain.pieces)
            state = (chain.prev, pieces, seg_id, n)
            hit = memo.get(state)
            if hit is not None:
                prev, new_pieces, fill, added = hit
                chain.hashes.extend(added)
                chain.prev, chain.pieces, chain.fill = prev, list(new_pieces), fill
                chain.tokens += n
                continue
            before = len(chain.hashes)
            chain.extend(seg_id, 0, n)
            if k == last and not remember_last:
                break
            added = tuple(chain.hashes[before:])
            if len(memo) >= self.max_entries or self._num_hashes + len(added) > self.max_hashes:
                memo.clear()
                self._num_hashes = 0
            memo[state] = (chain.prev, tuple(chain.pieces), chain.fill, added)
            self._num_hashes += len(added)
        return chain
