"""Settings shared by every service, read from the environment (pydantic-settings) and validated.

Each service defines its own subclass next to its `main.py`, adding only its fields:

    class RouterSettings(MeshSettings):
        locality_threshold_tokens: int = 2048

Variables: NATS_URL, NATS_USER, NATS_PASSWORD, NATS_PASSWORD_FILE, DATABASE_URL, AUTELLIX_ENV
(development|production), LOG_LEVEL, LOG_FORMAT (json|console), NATS_CONNECT_TIMEOUT_S,
NATS_REQUEST_TIMEOUT_S, AUDIT_MAX_AGE_S, AUDIT_MAX_BYTES, COMPLETIONS_MAX_BYTES, JETSTREAM_REPLICAS, CALL_DEADLINE_S,
METRICS_PORT (Prometheus text of a service without an HTTP port of its own; 0: none), METRICS_HOST.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal
from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.logging import LEVELS

DEFAULT_NATS_URL = "nats://127.0.0.1:4222"
_NATS_SCHEMES = ("nats", "tls", "ws", "wss")
MAX_STREAM_REPLICAS = 5  # JetStream refuses more


class MeshSettings(BaseSettings):
    """What every process on the mesh needs: where NATS is, how to log, the audit retention."""

    model_config = SettingsConfigDict(env_prefix="", extra="ignore", frozen=True, populate_by_name=True)
    # the namespaces whose unknown variables the service reports at start-up (settings_check.py)
    env_prefixes: ClassVar[tuple[str, ...]] = ("AUTELLIX_",)

    # this service's NATS role (docs/security.md): folded into NATS_URL when given; the password
    # from NATS_PASSWORD or, for compose/Kubernetes secrets, the file NATS_PASSWORD_FILE names
    nats_user: str = ""
    nats_password: SecretStr = SecretStr("")
    nats_password_file: str = ""
    nats_url: str = DEFAULT_NATS_URL
    environment: Literal["development", "production"] = Field(
        default="development", validation_alias="AUTELLIX_ENV")
    log_level: str = "info"
    log_format: Literal["json", "console", "auto"] = "auto"  # auto: json in production
    nats_connect_timeout_s: float = Field(default=5.0, gt=0, le=120)
    nats_request_timeout_s: float = Field(default=2.0, gt=0, le=300)
    # audit stream retention (JetStream limits): whichever limit is reached first drops the oldest
    audit_max_age_s: float = Field(default=7 * 24 * 3600.0, gt=0)
    audit_max_bytes: int = Field(default=1 << 30, gt=0)
    # the completions stream (never discards: when full it refuses and engines retry)
    completions_max_bytes: int = Field(default=4 << 30, gt=0)
    # copies of each stream on a NATS cluster (3 on a 3-node cluster: one node may fail); 1 on a
    # single server. Set by the streams' owner, the process table (shared/bus/jetstream.py)
    jetstream_replicas: int = 1
    # every call's overall deadline (placement to last token): the API fails it with a 504
    # `deadline_exceeded` and cancels it; the process table's idle expiry waits for calls this long
    call_deadline_s: float = Field(default=900.0, gt=0, le=86_400)
    metrics_port: int = Field(default=0, ge=0, le=65535)
    metrics_host: str = "127.0.0.1"  # 0.0.0.0 in a container that Prometheus scrapes from outside

    @field_validator("nats_url")
    @classmethod
    def _check_nats_url(cls, v: str, info: ValidationInfo) -> str:
        for server in v.split(","):
            parts = urlsplit(server.strip())
            if parts.scheme not in _NATS_SCHEMES or not parts.hostname:
                raise ValueError("NATS_URL must look like nats://host:port (comma-separated for a cluster), got "
                                 f"{parts.scheme}://{parts.hostname or ''}...")
        user, password = info.data.get("nats_user", ""), _password(info.data)
        if bool(user) != bool(password):
            raise ValueError("NATS_USER and a password (NATS_PASSWORD or NATS_PASSWORD_FILE) go together")
        if not user:
            return v
        userinfo = f"{quote(user, safe='')}:{quote(password, safe='')}"
        return ",".join(urlunsplit(p._replace(netloc=f"{userinfo}@{p.netloc.rpartition('@')[2]}"))
                        for p in (urlsplit(s.strip()) for s in v.split(",")))

    @field_validator("jetstream_replicas")
    @classmethod
    def _check_replicas(cls, v: int) -> int:
        if not 1 <= v <= MAX_STREAM_REPLICAS:
            raise ValueError(f"JETSTREAM_REPLICAS must be 1..{MAX_STREAM_REPLICAS} (JetStream's limit; at most the "
                             f"number of NATS cluster nodes), got {v}")
        return v

    @field_validator("log_level")
    @classmethod
    def _check_level(cls, v: str) -> str:
        if v.lower() not in LEVELS:
            raise ValueError(f"LOG_LEVEL must be one of {', '.join(LEVELS)}, got {v!r}")
        return v.lower()

    @property
    def log_json(self) -> bool:
        return self.environment == "production" if self.log_format == "auto" else self.log_format == "json"


def _password(data: dict) -> str:
    secret = data.get("nats_password")
    password = secret.get_secret_value() if isinstance(secret, SecretStr) else ""
    path = data.get("nats_password_file", "")
    if password and path:
        raise ValueError("give NATS_PASSWORD or NATS_PASSWORD_FILE, not both")
    if path:
        try:
            password = Path(path).read_text().strip()
        except OSError as exc:
            raise ValueError(f"NATS_PASSWORD_FILE {path!r} cannot be read: {exc.strerror}") from None
        if not password:
            raise ValueError(f"NATS_PASSWORD_FILE {path!r} is empty")
    return password


class DatabaseSettings(MeshSettings):
    """For services that own PostgreSQL state (the process table, migrations)."""

    database_url: str
    database_pool_size: int = Field(default=10, ge=1, le=200)

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme != "postgresql+asyncpg":
            raise ValueError(f"DATABASE_URL must use the postgresql+asyncpg:// scheme, got {parts.scheme or v!r}://")
        if not parts.path.strip("/"):
            raise ValueError("DATABASE_URL must name a database (postgresql+asyncpg://user@host/dbname)")
        return v
