"""Bearer API keys -> tenants. Keys are kept only as SHA-256 digests, compared in constant time.

`AUTELLIX_API_KEYS` is a comma-separated list of `tenant:key` pairs; a pair may give the digest
instead of the key as `tenant:sha256=<hex>`, so a deployment's environment need not hold keys.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

_DIGEST_PREFIX = "sha256="


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Tenant:
    name: str


class KeyStore:
    def __init__(self, tenant_by_digest: dict[str, Tenant]) -> None:
        self._tenant_by_digest = tenant_by_digest

    @classmethod
    def parse(cls, spec: str) -> KeyStore:
        """Parse `tenant:key,tenant:sha256=<hex>`; refuses empty, duplicate or malformed entries.

        A tenant may hold several keys (rotation)."""
        tenant_by_digest: dict[str, Tenant] = {}
        for raw in spec.split(","):
            entry = raw.strip()
            if not entry:
                continue
            tenant, sep, secret = entry.partition(":")
            tenant, secret = tenant.strip(), secret.strip()
            if not sep or not tenant or not secret:
                raise ValueError(f"AUTELLIX_API_KEYS entry starting {tenant[:12]!r} is not 'tenant:key'")
            if secret.startswith(_DIGEST_PREFIX):
                digest = secret.removeprefix(_DIGEST_PREFIX).lower()
                if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                    raise ValueError(f"AUTELLIX_API_KEYS: tenant {tenant!r} has a malformed sha256 digest")
            else:
                if len(secret) < 8:
                    raise ValueError(f"AUTELLIX_API_KEYS: tenant {tenant!r} has a key shorter than 8 characters")
                digest = key_digest(secret)
            if digest in tenant_by_digest:
                raise ValueError(f"AUTELLIX_API_KEYS: tenant {tenant!r} reuses a key already listed")
            tenant_by_digest[digest] = Tenant(tenant)
        return cls(tenant_by_digest)

    @property
    def num_keys(self) -> int:
        return len(self._tenant_by_digest)

    def tenant_for(self, key: str) -> Tenant | None:
        # looked up by digest: the map never holds a key, and timing reveals nothing about one
        return self._tenant_by_digest.get(key_digest(key))
