"""Secrets: API keys kept only as digests; NATS and PostgreSQL credentials only from the
environment (docker-compose, `autellix up`); credentials in a server URL never reach a log line."""

from __future__ import annotations

import argparse
import hashlib
import re
from pathlib import Path

import yaml

from autellix.commands import up
from services.session_api.auth import KeyStore
from shared.bus.connection import redact_url

ROOT = Path(__file__).resolve().parents[2]


def test_api_keys_are_stored_as_sha256_digests_only():
    key = "sk-acme-very-secret-123"
    store = KeyStore.parse(f"acme:{key},globex:sha256={hashlib.sha256(b'other-key-1234').hexdigest()}")
    held = repr(vars(store))
    assert key not in held and hashlib.sha256(key.encode()).hexdigest() in held
    assert store.tenant_for(key).name == "acme" and store.tenant_for("other-key-1234").name == "globex"
    assert store.tenant_for("sk-acme-very-secret-12") is None


def test_credentials_in_server_urls_are_redacted_for_logs():
    assert redact_url("nats://app:s3cret@nats:4222") == "nats://app:***@nats:4222"
    assert redact_url("nats://tok3n@a:4222,nats://b:4222") == "nats://***@a:4222,nats://b:4222"
    assert redact_url("nats://127.0.0.1:4222") == "nats://127.0.0.1:4222"


def test_compose_takes_every_credential_from_the_environment():
    text = (ROOT / "docker-compose.yml").read_text()
    compose = yaml.safe_load(text)["services"]
    # NATS: one password per role, into the server's environment and, as compose secrets, into
    # each service (tests/security/test_compose_auth.py checks the roles)
    for var, value in compose["nats"]["environment"].items():
        assert re.fullmatch(r"NATS_[A-Z0-9_]+_PASSWORD", var) and value.startswith(f"${{{var}:?"), var
    for secret in yaml.safe_load(text)["secrets"].values():
        assert set(secret) == {"environment"}, secret
    assert compose["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    for name, svc in compose.items():
        for var, value in (svc.get("environment") or {}).items():
            value = str(value)
            if var == "NATS_URL":
                assert "@" not in value, f"{name}.{var} carries a credential"
            if var == "DATABASE_URL":
                assert re.search(r":\$\{POSTGRES_PASSWORD", value), f"{name}.{var} has a literal secret"
            if var == "AUTELLIX_API_KEYS":
                assert value.startswith("${AUTELLIX_API_KEYS:?"), name
        assert "ports" not in svc or name == "session_api", f"{name} publishes a port: only the API may"


def test_up_reads_server_urls_from_the_environment(monkeypatch):
    monkeypatch.setenv("NATS_URL", "nats://app:pw@10.0.0.5:4222")
    monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://app:pw@db/autellix")
    parser = argparse.ArgumentParser()
    up.register(parser.add_subparsers())
    args = parser.parse_args(["up"])
    assert args.nats_url == "nats://app:pw@10.0.0.5:4222"
    assert args.database_url == "postgresql+asyncpg://app:pw@db/autellix"
