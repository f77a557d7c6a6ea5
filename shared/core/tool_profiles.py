"""Per-tool-class profiles: learned idle time and observation length, and tool inference.

Between two calls an agent runs a tool; how long it idles and how many tokens the tool's
observation adds decide how long to keep the session's KV and how much of it the next call reuses.
Each tool class keeps two exponential moving averages (EMA):

    ema <- ema + alpha * (sample - ema)        (alpha = 0.2 by default)

so the last ~1/alpha = 5 samples carry most of the weight: recent enough to follow a tool that
slows down (a test suite that grows), damped enough that one outlier does not flip a TTL. The first
sample of a class initialises its EMAs directly (no blend with a made-up prior).

The "default" class pools every observation; it predicts for a hint-less session with no history
and for a tool name never observed. Tool names are client input: unknown names become new classes
in an LRU-bounded table (`max_classes`), and the session -> last-tool memory is LRU-bounded as well,
so neither grows without bound. Absurd durations (negative, NaN, inf, enormous) are clamped and the
clamp is reported in the result, never silently absorbed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from shared.lru import LRU

DEFAULT_TOOL = "default"


@dataclass(frozen=True)
class ToolProfileConfig:
    alpha: float = 0.2  # EMA weight of a new sample
    max_classes: int = 256  # tool classes besides "default"; least recently used is dropped
    max_sessions: int = 65_536  # sessions whose last tool class is remembered (LRU)
    prior_idle_s: float = 1.0  # default class before any observation (arbitrary, replaced by data)
    prior_obs_tokens: float = 512.0
    max_idle_s: float = 3600.0  # a longer pause is a human or a dead client: clamp
    max_obs_tokens: float = 1_000_000.0
    max_name_chars: int = 64

    def __post_init__(self) -> None:
        if not 0 < self.alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha}")
        if self.max_classes < 1 or self.max_sessions < 1 or self.max_name_chars < 1:
            raise ValueError("max_classes, max_sessions and max_name_chars must be >= 1")
        if not (self.max_idle_s > 0 and self.max_obs_tokens > 0):
            raise ValueError("max_idle_s and max_obs_tokens must be > 0")
        if not (0 <= self.prior_idle_s <= self.max_idle_s and 0 <= self.prior_obs_tokens <= self.max_obs_tokens):
            raise ValueError("priors must lie within [0, max]")


@dataclass(frozen=True)
class Clamped:
    """A sanitised number; `note` says what was changed (None: taken as given)."""

    value: float | None  # None: unusable (NaN or missing), ignore it
    note: str | None = None


def clamp_amount(value: float | None, max_value: float, what: str) -> Clamped:
    """Clamp a client-supplied duration or length into [0, max_value]; NaN/None is unusable."""
    if value is None:
        return Clamped(None)
    if isinstance(value, float) and math.isnan(value):
        return Clamped(None, f"{what} is NaN: ignored")
    if value < 0:
        return Clamped(0.0, f"{what} {value!r} < 0: clamped to 0")
    if value > max_value:
        return Clamped(float(max_value), f"{what} {value!r} > {max_value:g}: clamped")
    return Clamped(float(value))


def normalize_tool_name(name: str | None, max_chars: int = 64) -> str | None:
    """Case- and space-insensitive class name, truncated; empty -> None (no hint)."""
    if name is None:
        return None
    cleaned = name.strip().lower()[:max_chars]
    return cleaned or None


class ToolSource(StrEnum):
    HINT = "hint"  # declared by the client (e.g. X-Next-Tool)
    HISTORY = "history"  # the session's most recent tool class
    DEFAULT = "default"  # nothing known


@dataclass(frozen=True)
class ToolResolution:
    tool: str
    source: ToolSource


@dataclass(frozen=True)
class ToolPrediction:
    tool: str  # the class asked for
    idle_s: float  # predicted pause before the session's next call
    obs_tokens: float  # predicted tokens the tool's observation appends
    known: bool  # False: the class has no observations, the default class answered
    notes: tuple[str, ...] = ()  # clamps applied to a client's duration hint


@dataclass(frozen=True)
class ObserveResult:
    tool: str
    idle_s: float  # the sample as used (after clamping); NaN: unusable, nothing was learned
    obs_tokens: float
    notes: tuple[str, ...]  # clamps applied
    evicted_class: str | None  # a class dropped to keep the table bounded


@dataclass
class ToolProfile:
    idle_s: float
    obs_tokens: float
    num_samples: int = 0

    def update(self, idle_s: float, obs_tokens: float, alpha: float) -> None:
        if self.num_samples == 0:
            self.idle_s, self.obs_tokens = idle_s, obs_tokens
        else:
            self.idle_s += alpha * (idle_s - self.idle_s)
            self.obs_tokens += alpha * (obs_tokens - self.obs_tokens)
        self.num_samples += 1


class ToolProfiles:
    """Learned per-tool profiles plus each session's last tool class. Pure state, no clock."""

    def __init__(self, cfg: ToolProfileConfig | None = None) -> None:
        self.cfg = cfg or ToolProfileConfig()
        self._default = ToolProfile(self.cfg.prior_idle_s, self.cfg.prior_obs_tokens)
        self._classes: LRU[str, ToolProfile] = LRU(self.cfg.max_classes)
        self._last_tool: LRU[str, str] = LRU(self.cfg.max_sessions)  # session -> tool class

    @property
    def num_classes(self) -> int:
        """Tool classes held besides "default" (never above cfg.max_classes)."""
        return len(self._classes)

    @property
    def num_sessions(self) -> int:
        return len(self._last_tool)

    def profile(self, tool: str) -> ToolProfile | None:
        return self._default if tool == DEFAULT_TOOL else self._classes.get(tool)

    def resolve(self, session_id: str, hint: str | None) -> ToolResolution:
        """The tool class for the pause after a session's call: the hint, else history, else default.

        A hint is remembered as the session's most recent tool class.
        """
        name = normalize_tool_name(hint, self.cfg.max_name_chars)
        if name is not None:
            self._remember(session_id, name)
            return ToolResolution(name, ToolSource.HINT)
        last = self._last_tool.touch(session_id)
        if last is not None:
            return ToolResolution(last, ToolSource.HISTORY)
        return ToolResolution(DEFAULT_TOOL, ToolSource.DEFAULT)

    def predict(self, tool: str, idle_hint_s: float | None = None) -> ToolPrediction:
        """Predicted idle time and observation length of `tool`.

        A client's explicit duration hint (clamped) overrides the learned idle time.
        """
        prof = self._classes.touch(tool)
        known = prof is not None or (tool == DEFAULT_TOOL and self._default.num_samples > 0)
        prof = prof or self._default
        hint = clamp_amount(idle_hint_s, self.cfg.max_idle_s, "idle hint")
        idle_s = prof.idle_s if hint.value is None else hint.value
        notes = (hint.note,) if hint.note else ()
        return ToolPrediction(tool, idle_s, prof.obs_tokens, known, notes)

    def observe(self, session_id: str, tool: str | None, idle_s: float, obs_tokens: float) -> ObserveResult:
        """Learn one measured pause: `idle_s` between the call's end and the next call's start,
        `obs_tokens` appended by the tool's observation. Unknown names become new classes."""
        name = normalize_tool_name(tool, self.cfg.max_name_chars) or DEFAULT_TOOL
        idle = clamp_amount(idle_s, self.cfg.max_idle_s, "idle_s")
        obs = clamp_amount(obs_tokens, self.cfg.max_obs_tokens, "obs_tokens")
        notes = tuple(n for n in (idle.note, obs.note) if n)
        if idle.value is None or obs.value is None:  # NaN: nothing to learn
            return ObserveResult(name, math.nan, math.nan, notes, None)
        evicted = None
        if name != DEFAULT_TOOL:
            prof = self._classes.touch(name)
            if prof is None:
                prof = ToolProfile(idle.value, obs.value)
                gone = self._classes.put(name, prof)
                evicted = gone[0][0] if gone else None
            prof.update(idle.value, obs.value, self.cfg.alpha)
            self._remember(session_id, name)
        self._default.update(idle.value, obs.value, self.cfg.alpha)
        return ObserveResult(name, idle.value, obs.value, notes, evicted)

    def forget_session(self, session_id: str) -> None:
        self._last_tool.pop(session_id, None)

    def _remember(self, session_id: str, tool: str) -> None:
        self._last_tool.put(session_id, tool)
