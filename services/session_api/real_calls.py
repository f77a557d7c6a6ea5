"""From an OpenAI request to one mesh call on a real model (backend vllm).

The request travels whole, as the client sent it, minus Autellix's own fields (session, threads,
tool hints); vLLM's OpenAI layer answers it. Here it is only measured with the model's own
tokenizer and chat template (prompt tokens for the context check and the router's load, prefix
segments for KV locality) and refused early where retrying cannot help.

Prefix-cache identity is per tenant (`tenant_salts.py`): vLLM gets `cache_salt` set from the
tenant, a client's own `cache_salt` overridden (folded into the tenant's, never passed as is),
and the prefix segments are salted the same way.
"""

from __future__ import annotations

import json

from fastapi import Request

from services.session_api.calls import PreparedCall, call_ids, new_prepared
from services.session_api.errors import ApiError
from services.session_api.model_tokenizer import ModelTokenizers, token_segments
from services.session_api.schemas import ChatCompletionRequest, CompletionRequest, ResponsesRequest
from services.session_api.served_models import ServedModel
from services.session_api.settings import SessionApiSettings
from services.session_api.size_hint import with_size_hint
from services.session_api.tenant_salts import TenantSalts
from services.session_api.tool_hints import with_hint
from shared.engine.program_meta import FLAT_PREFIX

# Autellix's own fields, never shown to vLLM. `vllm_xargs.session_id` stays in: it is vLLM's own
# field, so vLLM gets the request as it would without Autellix in between; `user` and
# `prompt_cache_key` stay too (OpenAI fields), whether or not they also name the session.
OWN_FIELDS = frozenset({"session_id", "thread_id", "parent_thread_id", "next_tool", "next_tool_idle_s",
                        "remaining_calls", "litellm_session_id"})
CHAT, COMPLETIONS, RESPONSES = "/v1/chat/completions", "/v1/completions", "/v1/responses"


def _no_retry(status: int, message: str, code: str, param: str | None) -> ApiError:
    return ApiError(status, message, "invalid_request_error", code, param, headers={"x-should-retry": "false"})


def _forwarded(body, cache_salt: str) -> bytes:
    """The request vLLM answers: the client's, minus Autellix's fields, with the tenant's cache salt."""
    fields = body.model_dump(exclude_unset=True, exclude=OWN_FIELDS, mode="json")
    fields["cache_salt"] = cache_salt
    if fields.get("priority") not in (None, 0):
        raise _no_retry(400, "'priority' is decided by the program's attained service (program-level MLFQ); "
                        "a client priority is not accepted", "unsupported_parameter", "priority")
    fields.pop("priority", None)
    xargs = fields.get("vllm_xargs") or {}
    if not isinstance(xargs, dict) or any(str(k).startswith(FLAT_PREFIX) for k in xargs):
        raise _no_retry(400, f"vllm_xargs keys starting with {FLAT_PREFIX!r} are reserved", "invalid_value",
                        "vllm_xargs")
    return json.dumps(fields, separators=(",", ":")).encode()


def _responses_messages(body: ResponsesRequest) -> list[dict]:
    """The Responses API input as chat messages, for counting only (vLLM renders it itself)."""
    messages = [{"role": "system", "content": body.instructions}] if body.instructions else []
    if isinstance(body.input, str):
        return [*messages, {"role": "user", "content": body.input}]
    for item in body.input:
        content = item.get("content", item.get("output", item.get("arguments", "")))
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        messages.append({"role": str(item.get("role", "user")), "content": str(content or "")})
    return messages


async def _prompt_ids(body, endpoint: str, served: ServedModel, tokenizers: ModelTokenizers) -> list[int]:
    if endpoint == CHAT:
        extras = body.model_extra or {}
        messages = [m.model_dump(exclude_none=True) for m in body.messages]
        return await tokenizers.chat_tokens(served.tokenizer, messages, extras.get("tools"),
                                            extras.get("chat_template_kwargs"))
    if endpoint == RESPONSES:
        extras = body.model_extra or {}
        tools = extras.get("tools")
        return await tokenizers.chat_tokens(served.tokenizer, _responses_messages(body),
                                            [{"type": "function", "function": t} for t in tools] if tools else None)
    prompt = body.prompt
    if isinstance(prompt, str):
        return await tokenizers.text_tokens(served.tokenizer, prompt)
    if all(isinstance(p, int) for p in prompt):
        return list(prompt)
    if len(prompt) == 1:
        return await tokenizers.text_tokens(served.tokenizer, str(prompt[0]))
    raise _no_retry(400, "only one prompt per request is served (a list of several strings was given)",
                    "unsupported_value", "prompt")


async def prepare_real(request: Request, body: ChatCompletionRequest | CompletionRequest | ResponsesRequest,
                       endpoint: str, served: ServedModel, settings: SessionApiSettings,
                       tokenizers: ModelTokenizers, tenant: str, salts: TenantSalts) -> PreparedCall:
    names = call_ids(request, body, settings)
    forwarded = _forwarded(body, salts.salt_for(tenant, (body.model_extra or {}).get("cache_salt")))
    prompt_ids = await _prompt_ids(body, endpoint, served, tokenizers)
    requested = body.requested_output_tokens()
    if not prompt_ids:
        raise _no_retry(400, "the prompt is empty", "empty_prompt", "messages")
    if served.max_model_len and len(prompt_ids) + (requested or 0) > served.max_model_len:
        raise _no_retry(400, f"this model's maximum context length is {served.max_model_len} tokens; the prompt "
                        f"is {len(prompt_ids)} tokens" + (f" and {requested} more were asked for" if requested else ""),
                        "context_length_exceeded", "messages")
    if requested is not None and requested > settings.max_output_tokens:
        raise _no_retry(400, f"max_tokens {requested} is over the limit of {settings.max_output_tokens}",
                        "max_tokens_too_large", "max_tokens")
    # the router's load estimate when the client sets no limit (vLLM then stops at EOS or the context)
    max_tokens = requested or settings.default_max_tokens
    salt = salts.segment_salt(tenant)
    prepared = new_prepared(request, tenant, names, token_segments(prompt_ids, salt=salt), max_tokens,
                            openai_body=forwarded, endpoint=endpoint, prefix_salt=salt)
    return with_size_hint(with_hint(prepared, request, body), request, body)
