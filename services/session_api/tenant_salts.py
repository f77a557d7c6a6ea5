"""Per-tenant prefix-cache identity, so no tenant can probe another's prompts (issue 13, item 6).

A shared prefix cache answers "has anyone sent this prefix?" through `cached_tokens` and time to
first token. Every prefix identity the API makes or forwards is salted with the tenant:
- real models: the request reaches vLLM with its per-request `cache_salt` set to
  `salt_for(tenant, client's cache_salt)`, so vLLM's block hashes, prefix hits and `cached_tokens`
  are per tenant. A client's own `cache_salt` is **overridden, not refused**: it is folded into
  the tenant's salt, so it still partitions the cache inside its tenant (as it does at vLLM) but
  can never name another tenant's partition. It must be a non-empty string of at most 128
  characters (vLLM's rule) or the call is a 400.
- the API's own prefix segments (the router's KV locality, the simulated engines' prefix cache):
  `segment_salt(tenant)` is hashed into every segment id, so two tenants' segments never match.
The salt is an HMAC-SHA256 of the tenant name under a key: `CACHE_SALT_KEY` if set, else one
derived from AUTELLIX_API_KEYS (the same on every replica of a deployment, so their requests
share a tenant's cache; new keys re-key the cache once). The raw tenant name never leaves the API.
"""

from __future__ import annotations

import hashlib
import hmac

from services.session_api.errors import ApiError

MAX_CLIENT_SALT_CHARS = 128  # vLLM's own limit on cache_salt
_KEY_CONTEXT = b"autellix cache salt\0"


class TenantSalts:
    def __init__(self, key: bytes) -> None:
        if not key:
            raise ValueError("a cache-salt key must not be empty")
        self._key = key
        self._by_tenant: dict[str, str] = {}

    @classmethod
    def from_settings(cls, cache_salt_key: str, api_keys_spec: str) -> TenantSalts:
        if cache_salt_key:
            return cls(cache_salt_key.encode())
        return cls(hashlib.sha256(_KEY_CONTEXT + api_keys_spec.encode()).digest())

    def _mac(self, text: str) -> str:
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()[:32]

    def segment_salt(self, tenant: str) -> str:
        """The tenant's salt (32 hex): cached, since every call needs it."""
        salt = self._by_tenant.get(tenant)
        if salt is None:
            salt = self._by_tenant[tenant] = self._mac(f"tenant\0{tenant}")
        return salt

    def salt_for(self, tenant: str, client_salt: object = None) -> str:
        """vLLM's `cache_salt` for a call of `tenant` that sent `client_salt` (None: none)."""
        if client_salt is None:
            return self.segment_salt(tenant)
        if not isinstance(client_salt, str) or not client_salt or len(client_salt) > MAX_CLIENT_SALT_CHARS:
            raise ApiError(400, f"cache_salt must be a non-empty string of at most {MAX_CLIENT_SALT_CHARS} "
                           "characters", "invalid_request_error", "invalid_value", "cache_salt",
                           headers={"x-should-retry": "false"})
        return self._mac(f"client\0{tenant}\0{client_salt}")
