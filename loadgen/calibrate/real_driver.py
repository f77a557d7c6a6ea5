"""The live driver for a real engine: token-exact prompts and full-length answers.

Only the request differs from `LiveDriver`'s: prompts from `exact_prompts`, greedy decoding and
`ignore_eos`, so a random-weight model generates exactly the spec's output tokens (it would
otherwise stop at a random end-of-sequence token) and every call is the one the simulator runs.
"""

from __future__ import annotations

from loadgen.calibrate.exact_prompts import call_messages
from loadgen.live.driver import LiveDriver


class RealEngineDriver(LiveDriver):
    def __init__(self, base_url: str, api_key: str, model: str = "tiny", **kwargs) -> None:
        super().__init__(base_url, api_key, model, extra_body={"ignore_eos": True, "temperature": 0.0},
                         messages_for=call_messages, **kwargs)
