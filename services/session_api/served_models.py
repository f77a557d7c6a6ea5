"""The models the live engines serve, learned from their heartbeats (engines own the model; the API
only checks and routes by what they announce).

A model is `real` when its engines run a real vLLM engine (backend vllm): its requests travel whole
and vLLM answers them; otherwise the engines are simulated (lite, emulated) and only the prompt's
size and shape travel. The API loads a real model's tokenizer from where its engines announce it.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.session_api.errors import ApiError, unavailable
from shared.engine.registry import is_simulated
from shared.protocol import messages as m


@dataclass(frozen=True)
class ServedModel:
    name: str
    backend: str
    tokenizer: str = ""  # backend vllm: folder or hub id of its tokenizer and chat template
    max_model_len: int = 0  # backend vllm: the context length (0: unknown, simulated)

    @property
    def real(self) -> bool:
        return not is_simulated(self.backend)


def model_not_found(name: str, served: list[str]) -> ApiError:
    return ApiError(404, f"the model {name!r} does not exist; served: {', '.join(served) or 'none'}",
                    "invalid_request_error", "model_not_found", "model", headers={"x-should-retry": "false"})


class ServedModels:
    def __init__(self) -> None:
        self._by_engine: dict[str, ServedModel] = {}

    def observe(self, hb: m.EngineHeartbeat) -> None:
        self._by_engine[hb.engine_id] = ServedModel(hb.model, hb.backend, hb.tokenizer, hb.max_model_len)

    def served(self, live_engines: list[str]) -> dict[str, ServedModel]:
        out: dict[str, ServedModel] = {}
        for engine_id in live_engines:
            model = self._by_engine.get(engine_id)
            if model is not None and model.name:
                out.setdefault(model.name, model)
        return out

    def resolve(self, name: str, live_engines: list[str]) -> ServedModel:
        """The served model called `name`: 404 `model_not_found` if no live engine serves it, 503
        while no engine is up at all."""
        served = self.served(live_engines)
        if name in served:
            return served[name]
        if not served:
            raise unavailable("no engine is serving yet; retry shortly", code="no_engine")
        raise model_not_found(name, sorted(served))
