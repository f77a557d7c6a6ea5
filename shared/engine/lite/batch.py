"""Running one planned batch of the lite engine: its modeled duration, the tokens it emits, the
calls it finishes (mixed into `LiteEngine`, whose queues, pool and counters it uses)."""

from __future__ import annotations

import math

from shared.engine.api import CallCompletion, StepReport
from shared.engine.lite.sequence import DECODING, FINISHED, PREFILL, Seq


class BatchMixin:
    def _run(self, now_s: float, chunks: dict[Seq, int], finishing: list[Seq], decodes_run: bool,
             preempted: list[str], promoted: list[str]) -> StepReport:
        num_dec = len(self.decoding) if decodes_run else 0
        chunk_tokens = sum(chunks.values()) if chunks else 0
        num_tokens = num_dec + chunk_tokens
        if num_tokens == 0:
            raise RuntimeError(f"engine {self.engine_id}: nothing schedulable with work queued")
        duration = math.sqrt(self._lin_floor_sq + (self._lin_c * num_tokens) ** 2)
        if self._ar_floor:
            duration += self._ar_floor + self._ar_c * num_tokens
        if num_dec:
            duration += self._dec_ctx * self._attn_read
        if chunks:
            prefill_attention_s = self.cost.prefill_attention_s
            for seq, n in chunks.items():
                duration += prefill_attention_s(n, seq.computed + n)
        duration += self._step_swap_s
        if self.config.speed_trace is not None:
            duration *= self.config.speed_trace.at(now_s)
        end_s = now_s + duration

        emitted = dict.fromkeys(self.decoding, 1) if num_dec else {}
        if num_dec:
            self._dec_steps += 1
            self._dec_busy_s += duration
            self._dec_ctx += num_dec
        else:
            self._alloc_step = -1  # nothing decoded: calls joining now have no block taken for them
        self._computed_total += num_tokens
        finished: list[CallCompletion] = []
        for seq in finishing:
            if seq.status == DECODING:
                self._drop_decoder(seq)
                finished.append(self._finish(seq, end_s))
        if chunks:
            bs_done = False
            for seq, n in chunks.items():
                seq.computed += n
                seq.service_s += duration
                self._register_full(seq)
                if seq.computed < seq.context_tokens:
                    continue
                seq.gen += 1
                emitted[seq.call_id] = 1
                if seq.first_token_s is None:
                    seq.first_token_s = end_s
                bs_done = True
                seq.status = FINISHED if seq.gen >= seq.max_out else DECODING
            if bs_done:
                still: list[Seq] = []
                for seq in self.prefilling:
                    if seq.status == PREFILL:
                        still.append(seq)
                    elif seq.status == FINISHED:
                        finished.append(self._finish(seq, end_s))
                    else:
                        self._to_decoding(seq)
                self.prefilling = still
        self._steps += 1
        self.stats["steps"] += 1
        return StepReport(
            duration_s=duration, num_scheduled_tokens=num_tokens, num_running=num_dec + len(chunks),
            num_waiting=len(self.waiting), kv_used_blocks=self.pool.num_used, kv_total_blocks=self.num_blocks,
            tokens_emitted=emitted, finished=finished, preempted=preempted, promoted_programs=promoted)

    def _finish(self, seq: Seq, end_s: float) -> CallCompletion:
        if self.recorder is not None:
            self._record_finish(seq)
        if self.retention is None:
            self._retire_blocks(seq)  # the output becomes a cached prefix for the program's next call
        else:
            self._retain_finished(seq, end_s)  # ... and stays pinned for its session's tool pause
        self._computed_total -= seq.computed
        self._live_work -= seq.prompt_tokens + seq.max_out
        seq.status = FINISHED
        del self.seqs[seq.call_id]
        sc = self.sched.remove(seq.call_id)  # its program is re-read at the next refresh
        return CallCompletion(
            call_id=seq.call_id, program_id=seq.program_id, thread_id=seq.thread_id,
            service_s=seq.service_s, wait_s=max(end_s - seq.submit_s - seq.service_s, 0.0),
            preemptions=seq.preemptions, prompt_tokens=seq.prompt_tokens, output_tokens=seq.gen,
            prefix_hit_tokens=seq.prefix_hit_tokens or 0, recomputed_tokens=seq.recomputed_tokens,
            first_token_s=seq.first_token_s if seq.first_token_s is not None else end_s, finish_s=end_s,
            thread_service_at_submit_s=sc.thread_service_at_submit_s, submit_epoch=sc.submit_epoch)
