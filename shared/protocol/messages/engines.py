"""State pushed to the schedulers: a program's ledger (process_table, controller -> engines,
router), an engine's load and queue (engine_agent -> router, controller), the tenants' classes
(controller -> engines)."""

from __future__ import annotations

from dataclasses import field

from shared.protocol.codec import Message, message, wire_struct


@message("program.service_updated")
class ProgramServiceUpdated(Message):
    """Event (core NATS): a program's ledger after folding in completions."""
    program_id: str
    service_s: float  # S_p
    wait_s: float  # W_p
    epoch: int
    thread_service_s: dict[str, float] = field(default_factory=dict)
    num_completed_calls: int = 0
    updated_at_ns: int = 0


@message("program.promoted")
class ProgramPromoted(Message):
    """Event (audit; engines listen too): anti-starvation promotion, W and S reset."""
    program_id: str
    epoch: int  # the epoch after the reset
    ratio: float = 0.0  # (W_p + w) / (S_p + t) that triggered it
    reason: str = ""


@message("engine.heartbeat")
class EngineHeartbeat(Message):
    """Event (core NATS, periodic): liveness and load of one engine."""
    engine_id: str
    backend: str = ""
    queue_depth: int = 0  # waiting calls
    running_calls: int = 0
    kv_used_blocks: int = 0
    kv_total_blocks: int = 0
    kv_use: float = 0.0  # used / total
    load: float = 0.0  # tokens still to process (least-loaded routing)
    interval_s: float = 1.0  # the next heartbeat is due within this
    started_at_ns: int = 0
    model: str = ""  # the model name it serves (OpenAI `model`)
    # backend vllm: where the API loads the model's tokenizer and chat template from (a folder or
    # a hub id), and the model's context length; empty / 0 for the simulated engines
    tokenizer: str = ""
    max_model_len: int = 0
    draining: bool = False  # shutting down: finishes the calls it holds, takes no new one


@wire_struct
class WaitingCall:
    call_id: str
    program_id: str
    thread_id: str = "main"
    wait_s: float = 0.0  # this call's queued time so far
    service_s: float = 0.0  # this call's attained service so far
    level: int = 0


@message("engine.queue_snapshot")
class EngineQueueSnapshot(Message):
    """Event (core NATS, periodic): the waiting calls of one engine, for the controller."""
    engine_id: str
    taken_at_ns: int = 0
    waiting: list[WaitingCall] = field(default_factory=list)
    running_call_ids: list[str] = field(default_factory=list)
    # engine time of the calls this agent completed since it started, per tenant (cumulative, so a
    # lost snapshot loses nothing: the controller charges the difference)
    tenant_service_s: dict[str, float] = field(default_factory=dict)


@message("tenant.shares")
class TenantShares(Message):
    """Event (core NATS, periodic; controller -> engines): the tenants whose calls go behind the
    others' (classes 1-16, the higher the further behind; a tenant not listed is class 0), and each
    active tenant's decayed service."""
    classes: dict[str, int] = field(default_factory=dict)
    service_s: dict[str, float] = field(default_factory=dict)
    half_life_s: float = 0.0
    decided_at_ns: int = 0
    # engines drop the classes this long after the last TenantShares (a stopped controller's
    # classes lapse instead of holding a tenant back for good)
    valid_for_s: float = 5.0
