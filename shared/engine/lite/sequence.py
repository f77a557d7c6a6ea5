"""One call's state inside the lite engine.

A decoding call advances by exactly one token in every decode step, so its counters are kept
lazily: anchors (decode-step index, computed tokens, generated tokens, engine busy time, service)
plus the engine's running totals give the current values without touching every call every step.
"""

from __future__ import annotations

from shared.engine.api import EngineCall, output_segment_id
from shared.engine.lite.hashing import HashChain

WAITING = 0  # queued: fresh, or preempted by recompute (no KV held)
SWAPPED = 1  # queued with its KV in host memory
PREFILL = 2  # running, more than one token to compute (chunked prefill or recompute)
DECODING = 3  # running, one token per decode step (lazy counters)
FINISHED = 4


class Seq:
    __slots__ = (
        "call", "call_id", "program_id", "thread_id", "order", "prompt_tokens", "max_out", "out_segment",
        "chain", "held", "reg_upto", "status", "computed", "gen", "service_s",
        "a_step", "a_computed", "a_gen", "a_busy_s", "a_service_s", "phase", "event_ver", "queue_ver",
        "sc", "charged_s", "preemptions", "prefix_hit_tokens", "recomputed_tokens", "lost_tokens",
        "swapped_blocks", "first_token_s", "submit_s", "key",
    )

    def __init__(self, call: EngineCall, chain: HashChain, now_s: float, prompt_tokens: int) -> None:
        self.call = call
        self.call_id = call.call_id
        self.program_id = call.program_id
        self.thread_id = call.thread_id
        self.order = call.seq
        self.prompt_tokens = prompt_tokens
        self.max_out = call.max_output_tokens
        self.out_segment = output_segment_id(call.call_id)
        self.chain = chain  # block hashes of the prompt, extended with output tokens on demand
        self.held: list = []  # one entry per KV block: hash (cached) or None (private)
        self.reg_upto = 0  # blocks [0, reg_upto) already offered to the prefix cache
        self.status = WAITING
        self.computed = 0  # tokens whose KV is computed (prefix hits included)
        self.gen = 0  # output tokens generated
        self.service_s = 0.0
        # lazy decode anchors (valid while DECODING)
        self.a_step = 0
        self.a_computed = 0
        self.a_gen = 0
        self.a_busy_s = 0.0
        self.a_service_s = 0.0
        self.phase = 0  # decode steps d with d % block_size == phase need a new block
        self.event_ver = 0
        self.queue_ver = 0
        self.sc = None  # its CallState in the engine's ProgramScheduleState (keys, levels, waits)
        self.charged_s = 0.0  # service already charged to `sc` (decoders are charged lazily)
        self.preemptions = 0
        self.prefix_hit_tokens: int | None = None  # set at first admission
        self.recomputed_tokens = 0
        self.lost_tokens = 0  # computed tokens dropped by the last recompute preemption
        self.swapped_blocks = 0
        self.first_token_s: float | None = None
        self.submit_s = now_s
        self.key: tuple = ()  # priority key while queued

    @property
    def context_tokens(self) -> int:
        """Tokens that exist (prompt + generated): the KV a call must eventually hold."""
        return self.prompt_tokens + self.gen

    def ensure_hashes(self, num_blocks: int) -> list[int]:
        """Block hashes for the first `num_blocks` blocks, hashing output tokens as needed."""
        chain = self.chain
        if len(chain.hashes) < num_blocks:
            want = min(num_blocks * chain.block_size, self.prompt_tokens + self.gen)
            if want > chain.tokens:
                out_start = chain.tokens - self.prompt_tokens
                chain.extend(self.out_segment, out_start, want - chain.tokens)
        return chain.hashes
