"""vLLM's real V1 scheduler and KV cache manager on the CPU: no GPU, no weights, no hub.

Builds a scheduler of any of our classes (`vllm_adapter.scheduler_class`) with its KV sized by hand,
makes requests, reads what a step scheduled, and fabricates what a GPU worker would return. The
`emulated` engine (`shared.engine.vllm_emulated`) and the tests drive vLLM through these; one of the
three modules that import vLLM (with `vllm_adapter` and `vllm_retention`).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach the hub: configs are local folders

import torch  # noqa: E402
from vllm.config import (  # noqa: E402
    CacheConfig,
    DeviceConfig,
    KVTransferConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import sha256  # noqa: E402
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash  # noqa: E402
from vllm.v1.core.sched.output import SchedulerOutput  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec  # noqa: E402
from vllm.v1.outputs import ModelRunnerOutput  # noqa: E402
from vllm.v1.request import Request, RequestStatus  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402

from shared.engine.program_sched import CONFIG_KEY  # noqa: E402
from shared.engine.step_log import StepLog, scheduled_work  # noqa: E402
from shared.engine.vllm_adapter import BLOCK_SIZE, scheduler_class  # noqa: E402


def _tiny_model_dir(max_model_len: int) -> str:
    """ModelConfig needs only a config.json when the tokenizer is skipped."""
    d = tempfile.mkdtemp(prefix="autellix-tiny-llama-")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
                   "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
                   "num_hidden_layers": 2, "vocab_size": 32000, "max_position_embeddings": max_model_len,
                   "torch_dtype": "float32"}, f)
    return d


_HASH_READY = False


def block_hasher():
    global _HASH_READY
    if not _HASH_READY:
        init_none_hash(sha256)
        _HASH_READY = True
    return get_request_block_hasher(BLOCK_SIZE, sha256)


def build_cpu_scheduler(*, num_blocks: int, kind: str = "autellix", settings: dict | None = None,
                        max_num_seqs: int = 256, max_num_batched_tokens: int = 8192,
                        chunked_prefill: bool = True, prefix_caching: bool = True,
                        max_model_len: int = 131072, sync: bool = True, log_stats: bool = False,
                        kv_transfer_config: dict | None = None) -> Scheduler:
    """vLLM's real V1 scheduler and KV cache manager on the CPU, KV sized by hand; with
    `kv_transfer_config`, vLLM builds that KV connector's scheduler side (e.g. the CPU offload tier)."""
    cls, queue_policy = scheduler_class(kind, sync)
    mc = ModelConfig(model=_tiny_model_dir(max_model_len), skip_tokenizer_init=True, dtype="float32",
                     max_model_len=max_model_len, seed=0)
    if not chunked_prefill:
        max_num_batched_tokens = max(max_num_batched_tokens, max_model_len)  # whole prefills must fit
    sc = SchedulerConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                         max_model_len=max_model_len, is_encoder_decoder=False, policy=queue_policy,
                         enable_chunked_prefill=chunked_prefill, async_scheduling=not sync,
                         scheduler_cls=cls)
    cc = CacheConfig(block_size=BLOCK_SIZE, enable_prefix_caching=prefix_caching)
    vc = VllmConfig(model_config=mc, scheduler_config=sc, cache_config=cc,
                    device_config=DeviceConfig(device="cpu"),
                    kv_transfer_config=KVTransferConfig(**kv_transfer_config) if kv_transfer_config else None,
                    additional_config={CONFIG_KEY: dict(settings or {})})
    kv = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=[
        KVCacheGroupSpec(["layer0"], FullAttentionSpec(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1,
                                                       dtype=torch.float32))])
    vc.cache_config.num_gpu_blocks = num_blocks  # normally set by GPU memory profiling
    sched_cls = vc.scheduler_config.get_scheduler_cls()
    return sched_cls(vllm_config=vc, kv_cache_config=kv, block_size=BLOCK_SIZE,
                     structured_output_manager=StructuredOutputManager(vc), log_stats=log_stats)


def make_request(request_id: str, prompt_token_ids: list[int], max_tokens: int, arrival_s: float,
                 extra_args: dict | None = None, priority: int = 0, hasher=None,
                 ignore_eos: bool = True) -> Request:
    """A vLLM request; with ignore_eos it generates exactly `max_tokens` tokens (as in the paper)."""
    sp = SamplingParams(max_tokens=max_tokens, ignore_eos=ignore_eos, extra_args=extra_args)
    return Request(request_id=request_id, prompt_token_ids=list(prompt_token_ids), sampling_params=sp,
                   pooling_params=None, priority=priority, arrival_time=arrival_s,
                   block_hasher=hasher if hasher is not None else block_hasher())


def fake_runner_output(sched: Scheduler, so: SchedulerOutput,
                       next_token: Callable[[str, int], int]) -> ModelRunnerOutput:
    """What a GPU worker would return: the next token of every request whose prompt is fully
    computed (`next_token(request_id, output_index)`), nothing for a partial prefill chunk."""
    req_ids = list(so.num_scheduled_tokens)
    sampled = []
    for rid in req_ids:
        r = sched.requests[rid]
        sampled.append([next_token(rid, r.num_output_tokens)] if r.num_computed_tokens >= r.num_tokens else [])
    return ModelRunnerOutput(req_ids=req_ids, req_id_to_index={r: i for i, r in enumerate(req_ids)},
                             sampled_token_ids=sampled)


def kv_usage(sched: Scheduler) -> tuple[int, int]:
    """(used blocks, total blocks) of the KV cache."""
    pool = sched.kv_cache_manager.block_pool
    total = pool.num_gpu_blocks - 1  # block 0 is vLLM's null block
    return total - pool.get_num_free_blocks(), total


def cached_prefix_tokens(sched: Scheduler, token_ids: list[int], hasher=None) -> int:
    """Prompt tokens the prefix cache holds for these token ids (a routing hint; no side effects)."""
    probe = make_request("__autellix_probe__", token_ids, 1, 0.0, hasher=hasher)
    _, num_cached, _ = sched.kv_cache_manager.get_computed_blocks(probe)
    return num_cached


def abort_request(sched: Scheduler, request_id: str) -> bool:
    """Abort a queued or running request; False when it is unknown or already finished."""
    return bool(sched.finish_requests(request_id, RequestStatus.FINISHED_ABORTED))


def remaining_tokens(sched: Scheduler) -> int:
    """Tokens still to process (prompt and recomputation plus outputs to generate), for routing."""
    total = 0
    for r in sched.requests.values():
        if not r.is_finished():
            total += r.num_prompt_tokens + r.max_tokens - r.num_computed_tokens
    return total


class TimedEngine:
    """A real vLLM engine (the model runs) with its engine core in this process, every core step
    timed with what it scheduled: the step-time profile behind a fitted cost preset."""

    def __init__(self, model: str, **engine_kwargs) -> None:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # engine core in-process: steps are ours to time
        from vllm import LLM

        self.engine = LLM(model=model, **engine_kwargs).llm_engine
        core = self.engine.engine_core.engine_core
        self.scheduler = core.scheduler
        self.steps: list[dict] = []  # {duration_s, *_cpu_s, tokens, decode_ctx, num_decodes, chunks}
        schedule, step_fn = self.scheduler.schedule, core.step_fn
        pending: list[dict] = []

        def timed_schedule(*a, **k):
            so = schedule(*a, **k)
            tokens, decode_ctx, chunks = scheduled_work(self.scheduler, so)
            pending.append({"tokens": tokens, "decode_ctx": decode_ctx,
                            "num_decodes": tokens - sum(n for n, _ in chunks), "chunks": chunks})
            return so

        def timed_step():
            # wall time, and the CPU time of this thread (the model runs on it: one OMP thread) and
            # of the process: on a shared machine the wall time includes waits for a core
            t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
            out = step_fn()
            if pending and pending[-1]["tokens"]:
                self.steps.append({"end_s": time.monotonic(), "duration_s": time.perf_counter() - t0,
                                   "thread_cpu_s": time.thread_time() - c0,
                                   "process_cpu_s": time.process_time() - p0, **pending[-1]})
            pending.clear()
            return out

        self.scheduler.schedule = timed_schedule
        core.step_fn = timed_step

    def add(self, request_id: str, token_ids: list[int], max_tokens: int) -> None:
        self.engine.add_request(request_id, {"prompt_token_ids": list(token_ids)},
                                SamplingParams(max_tokens=max_tokens, ignore_eos=True, detokenize=False))

    def step(self) -> None:
        self.engine.step()

    def busy(self) -> bool:
        return self.engine.has_unfinished_requests()

    def decoding(self) -> int:
        """Requests past their prompt (each decodes one token per step)."""
        return sum(1 for r in self.scheduler.running if r.num_computed_tokens >= r.num_prompt_tokens)

    def steps_logged(self) -> list[dict]:
        return self.steps


STEP_LOG_ENV = "AUTELLIX_STEP_LOG"  # the profiler's child engine core: where its steps go


class StepTimingScheduler(Scheduler):
    """vLLM's own scheduler that logs every step (`shared.engine.step_log`) to the JSON-lines file
    $AUTELLIX_STEP_LOG: the engine core's steps timed in its own process, as `vllm serve` and
    backend `vllm` run it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._step_log = StepLog(os.environ[STEP_LOG_ENV])

    def schedule(self, *args, **kwargs):
        t0, cpu0 = time.monotonic(), time.thread_time()
        so = super().schedule(*args, **kwargs)
        self._step_log.started(so, self, t0, cpu0)
        return so

    def update_from_output(self, scheduler_output, model_runner_output):
        out = super().update_from_output(scheduler_output, model_runner_output)
        self._step_log.finished(scheduler_output)
        return out


class ChildProcessTimedEngine:
    """A real vLLM engine with its engine core in a child process (as live), each step logged by
    `StepTimingScheduler`; requests and outputs as `TimedEngine`."""

    def __init__(self, model: str, step_log: str, **engine_kwargs) -> None:
        os.environ[STEP_LOG_ENV] = step_log
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1"
        from vllm import LLM

        self.step_log = step_log
        self.engine = LLM(model=model, scheduler_cls=f"{__name__}.StepTimingScheduler", **engine_kwargs).llm_engine
        self.tokens_out: dict[str, int] = {}

    def add(self, request_id: str, token_ids: list[int], max_tokens: int) -> None:
        self.tokens_out[request_id] = 0
        self.engine.add_request(request_id, {"prompt_token_ids": list(token_ids)},
                                SamplingParams(max_tokens=max_tokens, ignore_eos=True, detokenize=False))

    def step(self) -> None:
        for out in self.engine.step():
            if out.finished:
                self.tokens_out.pop(out.request_id, None)
            else:
                self.tokens_out[out.request_id] = len(out.outputs[0].token_ids) if out.outputs else 0

    def busy(self) -> bool:
        return self.engine.has_unfinished_requests()

    def decoding(self) -> int:
        """Unfinished requests past their prompt (they have an output token)."""
        return sum(1 for n in self.tokens_out.values() if n >= 1)

    def steps_logged(self) -> list[dict]:
        with open(self.step_log) as f:
            return [json.loads(line) for line in f if line.strip()]
