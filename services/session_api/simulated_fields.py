"""What a simulated engine (lite, emulated) cannot honour, refused by name.

Those engines model time and memory and fabricate tokens: they cannot stop at a string, sample
with a seed or a temperature, return logprobs, call tools, or follow a response format. A request
that sets any of these gets a 400 `unsupported_parameter` naming the field, never a silent default.
"""

from __future__ import annotations

from services.session_api.errors import ApiError

# fields that change what a real model would write, or what it returns besides text
_SAMPLING_AND_OUTPUT = ("stop", "seed", "temperature", "top_p", "top_k", "min_p", "frequency_penalty",
                        "presence_penalty", "repetition_penalty", "logit_bias", "logprobs", "top_logprobs",
                        "response_format", "tools", "tool_choice", "parallel_tool_calls", "functions",
                        "function_call", "best_of", "suffix", "echo", "structured_outputs", "guided_json",
                        "guided_regex", "guided_choice", "guided_grammar", "min_tokens", "ignore_eos",
                        "prediction", "audio", "modalities", "reasoning_effort", "vllm_xargs", "priority")
_DEFAULTS_OK = {"echo": (False,), "logprobs": (False,), "parallel_tool_calls": (True,), "tools": ([],),
                "tool_choice": ("none", "auto")}


def unsupported(field: str, backend: str, why: str = "") -> ApiError:
    return ApiError(400, f"{field!r} is not supported by the {backend} engine (simulated: it models time and "
                    f"memory, not text){why}; serve a real model (autellix up --backend vllm) to use it",
                    "invalid_request_error", "unsupported_parameter", field, headers={"x-should-retry": "false"})


def refuse_unhonoured(body, backend: str) -> None:
    fields = body.model_dump(exclude_unset=True)
    for name in _SAMPLING_AND_OUTPUT:
        value = fields.get(name)
        if value is None or value in _DEFAULTS_OK.get(name, ()):
            continue
        if name == "vllm_xargs" and isinstance(value, dict) and set(value) <= {"session_id"}:
            continue  # vLLM's way of naming the session: Autellix consumed it (session_names.py)
        raise unsupported(name, backend)
    if fields.get("n", 1) != 1:
        raise unsupported("n", backend, " (one choice per call)")
