"""session_api settings (environment variables, validated; see shared.settings for the common ones)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, model_validator

from shared.settings import MeshSettings


class SessionApiSettings(MeshSettings):
    env_prefixes: ClassVar[tuple[str, ...]] = ("AUTELLIX_", "API_")
    # comma-separated tenant:key (or tenant:sha256=<hex>) pairs; required in production
    autellix_api_keys: str = ""
    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8000, ge=1, le=65535)
    api_reuse_port: bool = False  # SO_REUSEPORT: several workers on one port (`autellix up --api-workers`)
    # with API_REUSE_PORT: this worker's own port, serving only /livez, /healthz and /metrics, so a
    # supervisor or Prometheus reaches each worker (the shared port reaches whichever one); 0: none
    api_worker_port: int = Field(default=0, ge=0, le=65535)
    max_prompt_tokens: int = Field(default=131_072, ge=1)  # simulated models: estimated as characters / 4
    max_output_tokens: int = Field(default=16_384, ge=1)
    default_max_tokens: int = Field(default=128, ge=1)  # when a request gives no max_tokens
    # a call whose engine has sent no heartbeat for this long fails with a retryable 503
    engine_ttl_s: float = Field(default=3.0, gt=0)
    # a stream whose client already has tokens waits this long after its last chunk for a silent
    # (not restarted) engine to resume before failing with a retryable 503 (stream_machine.py)
    stalled_stream_grace_s: float = Field(default=10.0, ge=0)
    route_timeout_s: float = Field(default=5.0, gt=0)
    # admission limits: 429 with Retry-After when exceeded. Per tenant they count over every API
    # worker (shared_limits.py; SHARED_LIMITS=false: per worker, limits.py); per session, per worker.
    # Defaults are safety bounds far above what honest work reaches: 5,000 calls/s is 2.7x the
    # fastest full path recorded for a whole stack on this project's 2-core hosts (1,817 calls/s)
    max_concurrent_calls_per_session: int = Field(default=256, ge=1)
    max_concurrent_calls_per_tenant: int = Field(default=4096, ge=1)
    max_requests_per_s_per_tenant: float = Field(default=5000.0, ge=0, allow_inf_nan=False)  # 0: no rate limit
    request_burst_per_tenant: int = Field(default=10_000, ge=1)  # two seconds at the default rate
    shared_limits: bool = True
    # `/v1/sessions` operations (open, read, close) per tenant and API worker (session_ops_limit.py)
    max_session_ops_per_s_per_tenant: float = Field(default=500.0, ge=0, allow_inf_nan=False)  # 0: no limit
    session_ops_burst_per_tenant: int = Field(default=1000, ge=1)
    # the limit owner (the process table) answers within this, or the worker limits its calls alone
    limit_owner_timeout_s: float = Field(default=0.5, gt=0, le=10)
    # admissions a worker holds granted ahead per tenant far from its limits (limit_grants.py), so
    # a call skips the round trip to the owner; 0: every call asks
    limit_grants_ahead: int = Field(default=8, ge=0, le=256)
    # HTTP limits (request_guard.py, http_protocol.py). The body cap stays under the NATS payload
    # limit (8 MiB, runtime/nats_server.py): a real model's request travels whole inside
    # its RouteCall, so a bigger body could be read but never placed
    max_request_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, le=8 * 1024 * 1024)
    max_json_depth: int = Field(default=64, ge=4)
    http_header_timeout_s: float = Field(default=10.0, gt=0)  # connection open -> headers complete
    http_body_timeout_s: float = Field(default=30.0, gt=0)  # headers complete -> body complete
    http_keep_alive_s: float = Field(default=5.0, gt=0)  # an idle connection closes after this
    # uvicorn limit_concurrency (503 beyond it); unset: what the open-file limit leaves room for
    # (connection_limit in main.py), so a flood gets 503s rather than accept() failing; 0: none
    max_connections: int | None = Field(default=None, ge=0)
    # SIGTERM: open streams finish for up to this long; uvicorn takes no new connection meanwhile
    shutdown_drain_s: float = Field(default=30.0, ge=0)
    # one structured line per HTTP request (access_log.py); probes and scrapes log at debug level
    access_log: bool = True
    # prefix-cache salts per tenant (tenant_salts.py); empty: derived from AUTELLIX_API_KEYS
    cache_salt_key: str = ""
    # a session's threads (session_threads.py): a new thread beyond this is a 400 too_many_threads
    max_threads_per_session: int = Field(default=256, ge=1)
    # a call reuses an open session's lookup this long (session_lookups.py); 0: ask the table every call.
    # Every close is pushed (session_closes.py) and ends it at once: this is the backstop for a
    # close event missed (say while disconnected from NATS), so a session is looked up about once a minute
    session_cache_ttl_s: float = Field(default=60.0, ge=0)
    # ... and, while the process table does not answer, one up to this old (0: a 503 at once)
    session_stale_if_unavailable_s: float = Field(default=60.0, ge=0)
    # a call whose engine died before the client saw a token is placed again, up to this many times
    max_redispatches: int = Field(default=2, ge=0)
    # body fields that may also name a call's session when no session header or field does, a
    # comma list of `user` and `prompt_cache_key`, in the order tried (session_names.py); off by
    # default since both mean something else to OpenAI too
    session_id_fields: str = ""

    @property
    def session_id_opt_in(self) -> tuple[str, ...]:
        return tuple(f.strip() for f in self.session_id_fields.split(",") if f.strip())

    @model_validator(mode="after")
    def _keys_in_production(self) -> SessionApiSettings:
        if self.environment == "production" and not self.autellix_api_keys.strip():
            raise ValueError("AUTELLIX_API_KEYS must list tenant:key pairs in production")
        if self.default_max_tokens > self.max_output_tokens:
            raise ValueError("DEFAULT_MAX_TOKENS must not exceed MAX_OUTPUT_TOKENS")
        if self.api_worker_port and (not self.api_reuse_port or self.api_worker_port == self.api_port):
            raise ValueError("API_WORKER_PORT is a worker's own port beside the shared API_PORT: it needs "
                             "API_REUSE_PORT=true and a port other than API_PORT")
        unknown = set(self.session_id_opt_in) - {"user", "prompt_cache_key"}
        if unknown:
            raise ValueError(f"SESSION_ID_FIELDS may list only user and prompt_cache_key, not {sorted(unknown)}")
        return self
