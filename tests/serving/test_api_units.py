"""Pieces of the API that need no server: keys, the token estimate, segments, filler text."""

from __future__ import annotations

import pytest

from services.session_api.auth import KeyStore, key_digest
from services.session_api.tokens import (
    OutputIndex,
    estimate_tokens,
    render_token_ids,
    segments_for_messages,
)
from shared.engine.api import output_segment_id


def test_keys_map_to_tenants_and_are_kept_hashed():
    store = KeyStore.parse(f"acme:sk-acme-123456, globex:sha256={key_digest('sk-globex-123456')}")
    assert store.tenant_for("sk-acme-123456").name == "acme"
    assert store.tenant_for("sk-globex-123456").name == "globex"
    assert store.tenant_for("sk-nope-123456") is None
    assert "sk-acme-123456" not in repr(vars(store))


@pytest.mark.parametrize("spec", ["acme", "acme:", ":sk-123456789", "acme:short", "a:sha256=zz",
                                  "a:sk-123456789,b:sk-123456789"])
def test_bad_key_specs_are_refused(spec):
    with pytest.raises(ValueError):
        KeyStore.parse(spec)


def test_token_estimate_is_characters_over_four():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2


def test_rendered_output_estimates_to_its_token_count():
    text = render_token_ids(list(range(37)))
    assert estimate_tokens(text) == 37


def test_segments_share_prefixes_and_map_outputs_back():
    outputs = OutputIndex()
    reply = render_token_ids([1, 2, 3])
    outputs.remember(reply, "call1")
    a = segments_for_messages([("system", "x" * 40), ("user", "hello")], outputs)
    b = segments_for_messages([("system", "x" * 40), ("user", "hello"), ("assistant", reply),
                               ("user", "")], outputs)
    assert b[:2] == a
    assert b[2] == (output_segment_id("call1"), 3)
    assert len(b) == 3  # the empty message takes no tokens
