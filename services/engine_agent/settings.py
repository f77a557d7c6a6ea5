"""engine_agent settings (environment variables, validated; `--engine-id` etc. override them)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from services.engine_agent.host_id import host_engine_id
from services.engine_agent.outbox import DEFAULT_MAX_ENTRIES
from services.policy_setting import DEFAULT_POLICY, PolicySetting
from shared.bus.connection import url_user
from shared.engine.cost_model import DEFAULT_PRESET, get_preset
from shared.engine.registry import all_backends
from shared.protocol.nats_roles import ENGINE_AGENT, engine_user
from shared.settings import MeshSettings

# settings of the modeled engines (lite, emulated) that a real vLLM engine has no use for
_SIMULATED_ONLY = frozenset({"engine_preset", "engine_max_num_seqs", "engine_num_blocks", "stream_interval_s",
                             "time_scale", "engine_kv_policy", "engine_kv_ttl_cap_s"})


class EngineAgentSettings(MeshSettings):
    env_prefixes: ClassVar[tuple[str, ...]] = ("AUTELLIX_", "ENGINE_")
    # default: derived from the host (host_id.py), so two hosts never share one by accident
    engine_id: str = Field(default_factory=lambda: host_engine_id(socket.gethostname(),
                                                                  os.environ.get("CUDA_VISIBLE_DEVICES")))
    engine_backend: str = "lite"  # a name of shared/engine/registry.py
    scheduling_policy: PolicySetting = DEFAULT_POLICY  # the mesh's one policy setting (policy_setting.py)
    engine_preset: str = DEFAULT_PRESET  # model x GPU cost model (shared.engine.cost_model)
    # vLLM's max_num_seqs (running calls per step) and KV blocks; None keeps the engine's defaults
    # (256, and the preset's free blocks)
    engine_max_num_seqs: int | None = Field(default=None, ge=1)
    engine_num_blocks: int | None = Field(default=None, ge=1)
    heartbeat_interval_s: float = Field(default=0.5, gt=0, le=10)
    # SIGTERM: calls in flight run to their end for up to this long (drain.py); new calls go elsewhere
    drain_timeout_s: float = Field(default=30.0, ge=0)
    # how long to listen for another agent's heartbeats on this id before starting (unique_id.py);
    # None: two heartbeat intervals, 0: no check
    engine_id_check_s: float | None = Field(default=None, ge=0, le=60)
    queue_snapshot_interval_s: float = Field(default=0.5, gt=0, le=60)
    # simulated engines: a call's tokens are sent at most this often after its first token (0: one
    # chunk per step); a real engine's pieces go on as vLLM writes them
    stream_interval_s: float = Field(default=0.05, ge=0, le=1)
    # 1.0 runs each modeled step for its modeled time; 0 runs as fast as the host allows
    time_scale: float = Field(default=1.0, ge=0)
    # KV between a session's calls (issue 6, lite and emulated backends): "prefix-lru" frees a finished call's
    # blocks to the prefix cache (vLLM's default); "workflow" keeps them pinned for the TTL
    # predicted for the client's X-Next-Tool (docs/design/kv_retention.md), capped at this
    engine_kv_policy: Literal["prefix-lru", "workflow"] = "prefix-lru"
    engine_kv_ttl_cap_s: float = Field(default=300.0, ge=0, le=3600)
    # backend vllm: the model (a folder, a hub id, or "tiny": the tiny random-weight Llama, made in
    # ENGINE_TINY_MODEL_DIR), the name clients send as `model`, and any other `vllm serve` flags
    engine_model: str = ""
    engine_served_model_name: str = ""  # default: "tiny" for the tiny model, else the model as given
    engine_vllm_args: str = ""  # e.g. "--max-model-len 8192 --enable-prefix-caching"
    engine_tiny_model_dir: str = "/tmp/autellix-tiny-model"
    # backend vllm: append every engine step's wall time and work to this file, one JSON line each
    # (shared/engine/step_log.py), the engine profiled as it serves; "" off
    engine_step_log: str = ""
    # backend upstream: the OpenAI-compatible `vllm serve` this agent fronts (run it with
    # --scheduling-policy priority), its API key, the tokenizer the API counts prompts with (default:
    # the model's `root` from the upstream's /v1/models), and how long one answer may stay silent
    engine_upstream_url: str = ""
    engine_upstream_api_key: str = ""
    engine_upstream_tokenizer: str = ""
    engine_upstream_read_timeout_s: float = Field(default=600.0, gt=0)
    engine_upstream_wait_s: float = Field(default=600.0, ge=0)  # for its /v1/models at start-up
    # how often the upstream's /metrics is read: vLLM renders it in its server's event loop (about
    # 8 ms of its CPU a read here, every stream on it held meanwhile), so not every heartbeat
    engine_upstream_scrape_interval_s: float = Field(default=2.0, gt=0, le=60)
    # completions not yet acked by JetStream are kept in a file here (outbox.py) and replayed by the
    # next agent with this id: a folder that outlives the process (a volume); "" is
    # $XDG_STATE_HOME/autellix/engine-outbox (~/.local/state/...)
    engine_outbox_dir: str = ""
    engine_outbox_max_entries: int = Field(default=DEFAULT_MAX_ENTRIES, ge=1, le=10_000_000)

    @field_validator("engine_backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        if value not in all_backends():
            raise ValueError(f"unknown engine backend {value!r}; valid: {', '.join(all_backends())}")
        return value

    @model_validator(mode="after")
    def _vllm_needs_a_model(self) -> EngineAgentSettings:
        upstream_fields = sorted(f for f in self.model_fields_set if f.startswith("engine_upstream_"))
        if self.engine_backend == "upstream":
            if not self.engine_upstream_url.startswith(("http://", "https://")):
                raise ValueError("ENGINE_UPSTREAM_URL (or --upstream) must be the http(s) URL of an "
                                 f"OpenAI-compatible vllm serve with ENGINE_BACKEND=upstream, not {self.engine_upstream_url!r}")
            refused = sorted((self.model_fields_set & _SIMULATED_ONLY)
                             | ({"engine_model", "engine_vllm_args", "engine_step_log"} & self.model_fields_set))
            if refused:
                raise ValueError(f"{', '.join(f.upper() for f in refused)} do not apply to backend upstream: "
                                 "its engine is the vllm serve at ENGINE_UPSTREAM_URL, with its own flags")
            return self
        if upstream_fields:
            raise ValueError(f"{', '.join(f.upper() for f in upstream_fields)} apply to backend upstream only")
        if self.engine_backend == "vllm" and not self.engine_model.strip():
            raise ValueError("ENGINE_MODEL (or --model) is required with ENGINE_BACKEND=vllm: a model folder, "
                             "a hub id, or 'tiny'")
        simulated_only = sorted(self.model_fields_set & _SIMULATED_ONLY)
        if self.engine_backend == "vllm" and simulated_only:
            raise ValueError(f"{', '.join(f.upper() for f in simulated_only)} apply to the simulated backends; "
                             "with ENGINE_BACKEND=vllm give vLLM's own flags in ENGINE_VLLM_ARGS "
                             "(e.g. --max-num-seqs, --num-gpu-blocks-override)")
        if self.engine_backend != "vllm" and (self.engine_model or self.engine_vllm_args or self.engine_step_log):
            raise ValueError(f"ENGINE_MODEL, ENGINE_VLLM_ARGS and ENGINE_STEP_LOG apply to backend vllm only, not "
                             f"{self.engine_backend!r}")
        folder = Path(self.engine_step_log).parent
        if self.engine_step_log and not folder.is_dir():
            raise ValueError(f"ENGINE_STEP_LOG's folder {str(folder)!r} does not exist")
        return self

    @model_validator(mode="after")
    def _logs_in_as_its_own_engine(self) -> EngineAgentSettings:
        # each engine has its own NATS user (nats_roles.engine_user): another engine's would be
        # refused on every subject this one publishes, so say so at start-up instead
        user = url_user(self.nats_url)
        if user.partition(".")[0] == ENGINE_AGENT and user != engine_user(self.engine_id):
            raise ValueError(f"engine {self.engine_id!r} must log in to NATS as {engine_user(self.engine_id)!r}, "
                             f"not {user!r}: give it its own credential (docs/security.md: adding an engine), "
                             "or set ENGINE_ID to the engine that credential is for")
        return self

    @field_validator("engine_preset")
    @classmethod
    def _known_preset(cls, v: str) -> str:
        get_preset(v)  # ValueError naming the valid presets
        return v.strip().lower()

    @field_validator("engine_id")
    @classmethod
    def _subject_safe(cls, v: str) -> str:
        if not v or any(c in v for c in ".*> \t"):
            raise ValueError(f"ENGINE_ID {v!r} may not be empty or contain '.', '*', '>' or spaces")
        return v
