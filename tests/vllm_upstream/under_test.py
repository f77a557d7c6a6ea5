"""What the vendored vLLM tests run against: our scheduler class, and model configs made locally.

`AUTELLIX_UPSTREAM_SCHEDULER` picks the class: `autellix` (default: SyncProgramAwareScheduler, or
ProgramAwareScheduler where a test asks for async scheduling) or `stock` (vLLM's own classes, to
compare against upstream's expectations).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from tests.vllm.needs_vllm import import_adapter

adapter = import_adapter()

SCHEDULERS = ("autellix", "stock")

# vLLM's tests name hub models; only their config.json is read (no weights, tokenizer skipped or
# unused). These are the published configs' fields the scheduler paths touch.
_CONFIGS = {
    "facebook/opt-125m": {
        "architectures": ["OPTForCausalLM"], "model_type": "opt", "hidden_size": 768, "num_hidden_layers": 12,
        "ffn_dim": 3072, "num_attention_heads": 12, "vocab_size": 50272, "max_position_embeddings": 2048,
        "word_embed_proj_dim": 768, "do_layer_norm_before": True, "bos_token_id": 2, "eos_token_id": 2,
        "pad_token_id": 1, "torch_dtype": "float16", "activation_function": "relu", "enable_bias": True},
}
_UNAVAILABLE = {
    "llava-hf/llava-1.5-7b-hf": "vLLM's Llava model class imports torchvision, which this install lacks "
                                "(make setup removes the torchvision wheel: it does not load with torch 2.13+cpu)",
}


def scheduler_under_test(async_scheduling: bool) -> type:
    kind = os.environ.get("AUTELLIX_UPSTREAM_SCHEDULER", "autellix")
    if kind not in SCHEDULERS:
        raise ValueError(f"unknown AUTELLIX_UPSTREAM_SCHEDULER {kind!r}; valid: {', '.join(SCHEDULERS)}")
    if kind == "stock":
        from vllm.v1.core.sched.async_scheduler import AsyncScheduler
        from vllm.v1.core.sched.scheduler import Scheduler

        return AsyncScheduler if async_scheduling else Scheduler
    cls, _ = adapter.scheduler_class("autellix", sync=not async_scheduling)
    return cls


def local_model(name: str) -> str:
    """A local folder holding `name`'s config.json (nothing is downloaded)."""
    if name in _UNAVAILABLE:
        pytest.skip(f"model {name}: {_UNAVAILABLE[name]}")
    if name not in _CONFIGS:
        return name
    d = Path(tempfile.gettempdir()) / f"autellix-upstream-{os.getuid()}" / name.replace("/", "--")
    d.mkdir(parents=True, exist_ok=True)
    path = d / "config.json"
    if not path.exists():
        tmp = d / f".config.{os.getpid()}.json"
        tmp.write_text(json.dumps(_CONFIGS[name]))
        tmp.replace(path)
    return str(d)
