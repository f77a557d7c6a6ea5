"""Per-tenant prefix-cache identity (tenant_salts.py): vLLM's cache_salt and the API's own segments."""

from __future__ import annotations

import asyncio
import json

import pytest

from services.session_api.errors import ApiError
from services.session_api.model_tokenizer import token_segments
from services.session_api.real_calls import _forwarded
from services.session_api.schemas import ChatCompletionRequest
from services.session_api.session_lookups import SessionLookups
from services.session_api.tenant_salts import TenantSalts
from services.session_api.tokens import OutputIndex, segments_for_messages
from shared.protocol import messages as m

SALTS = TenantSalts.from_settings("", "acme:sk-acme-0123456789,globex:sk-globex-0123456789")


def test_each_tenant_has_its_own_stable_salt_that_never_shows_its_name():
    acme, globex = SALTS.salt_for("acme"), SALTS.salt_for("globex")
    assert acme != globex and acme == SALTS.salt_for("acme") and "acme" not in acme
    assert len(acme) == 32 and all(c in "0123456789abcdef" for c in acme)  # within vLLM's rules
    assert TenantSalts.from_settings("k1", "").salt_for("acme") != TenantSalts.from_settings("k2", "").salt_for("acme")


def test_a_client_salt_partitions_inside_its_tenant_only():
    mine = SALTS.salt_for("acme", "user-7")
    assert mine not in (SALTS.salt_for("acme"), SALTS.salt_for("globex", "user-7"))
    assert mine == SALTS.salt_for("acme", "user-7")
    # a tenant cannot name another's partition, not even with the other's salt itself
    assert SALTS.salt_for("globex", SALTS.salt_for("acme")) != SALTS.salt_for("acme")


@pytest.mark.parametrize("bad", ["", 7, "x" * 129, ["a"]])
def test_a_malformed_client_salt_is_a_400(bad):
    with pytest.raises(ApiError) as raised:
        SALTS.salt_for("acme", bad)
    assert raised.value.status == 400 and raised.value.param == "cache_salt"


def test_the_forwarded_request_carries_the_tenants_salt_never_the_clients():
    body = ChatCompletionRequest.model_validate({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                                                 "cache_salt": "mine", "session_id": "s"})
    forwarded = json.loads(_forwarded(body, SALTS.salt_for("acme", "mine")))
    assert forwarded["cache_salt"] == SALTS.salt_for("acme", "mine") != "mine"
    assert "session_id" not in forwarded


def test_prefix_segments_never_match_across_tenants():
    ids = list(range(600))
    acme = token_segments(ids, salt=SALTS.segment_salt("acme"))
    assert acme == token_segments(ids, salt=SALTS.segment_salt("acme"))
    assert not {s for s, _ in acme} & {s for s, _ in token_segments(ids, salt=SALTS.segment_salt("globex"))}
    outputs = OutputIndex()
    outputs.remember("an answer", "call-1", SALTS.segment_salt("acme"))
    messages = [("system", "be brief"), ("assistant", "an answer")]
    mine = segments_for_messages(messages, outputs, SALTS.segment_salt("acme"))
    theirs = segments_for_messages(messages, outputs, SALTS.segment_salt("globex"))
    assert mine[1][0] == "out:call-1" and not {s for s, _ in mine} & {s for s, _ in theirs}


async def test_concurrent_lookups_share_one_request_and_calls_reuse_an_open_one():
    asked = []

    async def fetch():
        asked.append(1)
        return m.SessionInfo(session_id="p", tenant="acme", primary_engine="e0")  # reusable once it names one

    lookups = SessionLookups(ttl_s=60)
    replies = await asyncio.gather(*(lookups.lookup("acme\0p", fetch, cached_ok=False) for _ in range(50)))
    assert len(asked) == 1 and all(r.session_id == "p" for r in replies)
    await lookups.lookup("acme\0p", fetch, cached_ok=True)
    assert len(asked) == 1  # from the cache
    await lookups.lookup("acme\0p", fetch, cached_ok=False)
    assert len(asked) == 2  # a read of the session always asks
    lookups.forget("acme\0p")
    await lookups.lookup("acme\0p", fetch, cached_ok=True)
    assert len(asked) == 3
