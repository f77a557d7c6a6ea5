# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
# Vendored from vLLM v0.32.0 (tests/v1/core/test_prefix_caching.py, lines 125-142 and 163-247):
# only the helpers test_scheduler.py imports. See tests/vllm_upstream/README.md.
"""KV cache manager builders from vLLM's prefix-caching tests."""

from dataclasses import replace
from math import lcm

import torch

from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.hisparse.coordinator import get_hisparse_coordinator
from vllm.v1.kv_cache_interface import (
    FullAttentionSpec,
    HiSparseHotSpec,
    HiSparseResidentSpec,
    KVCacheConfig,
    KVCacheGroupRole,
    KVCacheGroupSpec,
)

def make_kv_cache_manager(kv_cache_config: KVCacheConfig, **kwargs) -> KVCacheManager:
    """Build a ``KVCacheManager``, deriving ``scheduler_block_size`` from the
    config (LCM of group block sizes) unless explicitly provided. This mirrors
    ``resolve_kv_cache_block_sizes`` for the non-context-parallel case used by
    these tests, so callers don't have to pass it at every site."""
    kwargs.setdefault(
        "scheduler_block_size",
        lcm(*(g.kv_cache_spec.block_size for g in kv_cache_config.kv_cache_groups)),
    )
    if "retention_interval" in kwargs:
        kv_cache_config = replace(
            kv_cache_config,
            prefix_cache_retention_interval=kwargs.pop("retention_interval"),
        )
    manager = KVCacheManager(kv_cache_config, **kwargs)
    if kv_cache_config.hisparse_host_num_blocks is not None:
        get_hisparse_coordinator(manager)
    return manager


HISPARSE_BLOCK_SIZE = 16


def make_hisparse_kv_cache_config(
    num_blocks: int,
    host_num_blocks: int,
    *,
    transfer_device_cache: bool = False,
    num_resident_groups: int = 1,
) -> KVCacheConfig:
    source_spec = FullAttentionSpec(
        block_size=HISPARSE_BLOCK_SIZE,
        num_kv_heads=1,
        head_size=1,
        dtype=torch.float32,
    )
    groups = [
        KVCacheGroupSpec(
            ["source"],
            source_spec,
            role=KVCacheGroupRole.HISPARSE_SOURCE,
            host_resident=True,
        ),
        KVCacheGroupSpec(
            ["indexer"],
            source_spec,
            enable_kv_transfer=transfer_device_cache,
            role=KVCacheGroupRole.HISPARSE_INDEXER,
        ),
    ]
    groups.append(
        KVCacheGroupSpec(
            ["resident"],
            HiSparseResidentSpec(
                block_size=HISPARSE_BLOCK_SIZE,
                page_size=HISPARSE_BLOCK_SIZE * 4,
            ),
            enable_kv_transfer=transfer_device_cache,
        )
    )
    groups.append(
        KVCacheGroupSpec(
            ["hot"],
            HiSparseHotSpec(
                block_size=HISPARSE_BLOCK_SIZE,
                page_size=HISPARSE_BLOCK_SIZE * 4,
                blocks_per_request=2,
            ),
            enable_kv_transfer=False,
        )
    )
    for group_idx in range(1, num_resident_groups):
        groups.extend(
            replace(
                group, layer_names=[f"{name}_{group_idx}" for name in group.layer_names]
            )
            for group in groups[2:4]
        )
    return KVCacheConfig(
        num_blocks=num_blocks,
        hisparse_host_num_blocks=host_num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=groups,
    )


def make_hisparse_kv_cache_manager(
    num_blocks: int,
    host_num_blocks: int,
    *,
    max_model_len: int = 128,
    max_in_flight_tokens: int | None = None,
    enable_caching: bool = False,
    num_prefill_lookahead: int = 0,
    **config_kwargs,
) -> KVCacheManager:
    config = make_hisparse_kv_cache_config(num_blocks, host_num_blocks, **config_kwargs)
    return make_kv_cache_manager(
        config,
        max_model_len=max_model_len,
        max_in_flight_tokens=max_in_flight_tokens,
        enable_caching=enable_caching,
        hash_block_size=HISPARSE_BLOCK_SIZE,
        num_prefill_lookahead=num_prefill_lookahead,
    )
