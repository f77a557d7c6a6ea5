"""The `lite` engine model: continuous batching, paged KV, prefix cache, preemption, in pure Python."""

from shared.engine.lite.config import BatchingMode, LiteEngineConfig, PreemptionMode
from shared.engine.lite.engine import LiteEngine

__all__ = ["BatchingMode", "LiteEngine", "LiteEngineConfig", "PreemptionMode"]
