"""Prometheus series of an engine agent.

Simulated backends (lite, emulated) export vLLM's own names and labels (`model_name`, `engine`), so
the dashboards made for vLLM read them unchanged. The real backends do not: backend `vllm` runs
vLLM in this process, whose own stat logger registers those names here itself, and an upstream
`vllm serve` exports them on its own /metrics. Every backend exports the `autellix_engine_*`
series: queued calls by MLFQ level, preemptions and recomputed tokens of completed calls, and the
engine's KV-retention counters where it keeps them.

Gauges are set from the agent's state loop (the event loop's thread), never computed in a scrape
(the scrape runs in the metrics server's thread, beside the loop mutating the agent's tables).
"""

from __future__ import annotations

from functools import cache, lru_cache

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily

from shared.engine.capabilities import Capability
from shared.engine.registry import is_simulated
from shared.protocol import messages as m

MAX_LEVELS = 16  # MLFQ levels reported one by one; deeper ones add to the last

QUEUED_CALLS = Gauge("autellix_engine_queued_calls", "Calls waiting on the engine, by the MLFQ level of "
                     "their program (queue snapshot)", ["engine", "level"])
RUNNING_CALLS = Gauge("autellix_engine_running_calls", "Calls in the engine's running batch", ["engine"])
COMPLETED_CALLS = Counter("autellix_engine_calls_completed", "Calls the engine completed (CallCompleted)",
                          ["engine", "finish_reason"])
PREEMPTIONS = Counter("autellix_engine_preemptions", "Preemptions of completed calls (priority or KV), "
                      "from CallCompleted", ["engine"])
RECOMPUTED_TOKENS = Counter("autellix_engine_recomputed_tokens", "Tokens recomputed after preemptions, "
                            "from CallCompleted", ["engine"])
PREFIX_HIT_TOKENS = Counter("autellix_engine_prefix_hit_tokens", "Prompt tokens served from the prefix cache",
                            ["engine"])
SERVICE_SECONDS = Counter("autellix_engine_service_seconds", "Engine time of completed calls in the running "
                          "batch", ["engine"])
WAIT_SECONDS = Counter("autellix_engine_wait_seconds", "Queued time of completed calls", ["engine"])
# an engine never gives up on a completion silently: these show what it still owes JetStream
UNACKED_COMPLETIONS = Gauge("autellix_engine_completions_unacked", "Completions made and not yet acked by "
                            "JetStream (retried until they are; kept in the outbox while it has room)", ["engine"])
OUTBOX_REFUSED = Gauge("autellix_engine_outbox_refused", "Completions the outbox could not keep (full or "
                       "failing) since the agent started: a kill would lose them", ["engine"])

# engine stats key -> exported counter (emulated: stats(); lite: the stats dict)
_RETENTION_COUNTERS = {
    "retention_resumes": ("autellix_retention_hits", "Calls that found their session's KV retained"),
    "retention_victims": ("autellix_retention_victims", "Retained sessions unpinned for blocks another call needed"),
    "retained_sessions": ("autellix_retention_pins", "Sessions whose KV was kept after a call"),
    "retention_expired": ("autellix_retention_expired", "Retained sessions whose TTL ran out"),
}


class _EngineStats:
    """The engines' own cumulative counters, copied each state tick, exported as counters."""

    def __init__(self) -> None:
        self.by_engine: dict[str, dict[str, int]] = {}

    def collect(self):
        for key, (name, doc) in _RETENTION_COUNTERS.items():
            family = CounterMetricFamily(name, doc, labels=["engine"])
            for engine_id, stats in list(self.by_engine.items()):
                if key in stats:
                    family.add_metric([engine_id], stats[key])
            yield family


ENGINE_STATS = _EngineStats()
REGISTRY.register(ENGINE_STATS)


# vLLM's names live in a registry of their own, served through a collector that claims no names:
# where vLLM also runs in the process (tests drive both), its loggers register the same names in
# the default registry, which refuses a second claim
_VLLM_NAMES_REGISTRY = CollectorRegistry(auto_describe=False)


class _VllmNamesCollector:
    def describe(self) -> list:
        return []

    def collect(self):
        return _VLLM_NAMES_REGISTRY.collect()


REGISTRY.register(_VllmNamesCollector())


class _VllmNames:
    """vLLM's series (vllm/v1/metrics/loggers.py names, buckets and labels), made only where no vLLM
    in this process registers them itself."""

    def __init__(self) -> None:
        labels = ["model_name", "engine"]
        r = {"registry": _VLLM_NAMES_REGISTRY}
        self.running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", labels, **r)
        self.waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, **r)
        self.kv_usage = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels, **r)
        self.preemptions = Counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                                   labels, **r)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, **r)
        self.generation_tokens = Counter("vllm:generation_tokens", "Number of generation tokens processed.", labels, **r)
        self.success = Counter("vllm:request_success", "Count of successfully processed requests.",
                               [*labels, "finished_reason"], **r)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              labels, buckets=(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                               1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0), **r)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                             labels, buckets=(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
                                              2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0), **r)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                             labels, buckets=(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                                              50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0), **r)


@cache
def vllm_names() -> _VllmNames:
    return _VllmNames()


class EngineMetrics:
    """One agent's series, with its label values bound once (a call pays a dict lookup, no more)."""

    def __init__(self, engine_id: str, backend: str, model_name: str) -> None:
        self.engine_id = engine_id
        self.simulated = is_simulated(backend)
        self.vllm = vllm_names() if self.simulated else None
        if self.vllm is not None:
            v, labels = self.vllm, (model_name, engine_id)
            self._ttft, self._itl, self._e2e = v.ttft.labels(*labels), v.itl.labels(*labels), v.e2e.labels(*labels)
            self._running, self._waiting, self._kv = (v.running.labels(*labels), v.waiting.labels(*labels),
                                                      v.kv_usage.labels(*labels))
            self._vllm_preemptions = v.preemptions.labels(*labels)
            self._prompt, self._generation = v.prompt_tokens.labels(*labels), v.generation_tokens.labels(*labels)
            self._labels = labels
            self._success = lru_cache(maxsize=64)(lambda reason: v.success.labels(*labels, reason))
        self._running_calls = RUNNING_CALLS.labels(engine_id)
        self._levels_seen: set[str] = set()

    # --- per call (simulated backends: the agent sees each token step) ----------------------------
    def first_token(self, since_submit_s: float) -> None:
        if self.vllm is not None:
            self._ttft.observe(since_submit_s)

    def tokens_sent(self, gap_s: float, num_tokens: int) -> None:
        """A chunk of `num_tokens` sent `gap_s` after the call's previous one: their mean gap (the
        chunks coalesce steps; one observation per chunk keeps the cost per call small)."""
        if self.vllm is not None and num_tokens > 0:
            self._itl.observe(gap_s / num_tokens)

    def call_finished(self, since_submit_s: float) -> None:
        if self.vllm is not None:
            self._e2e.observe(since_submit_s)

    def completed(self, done: m.CallCompleted) -> None:
        """vLLM's counters of what CallCompleted reports (count_completion does the rest)."""
        if self.vllm is not None:
            self._vllm_preemptions.inc(done.preemptions)
            self._prompt.inc(done.prompt_tokens)
            self._generation.inc(done.output_tokens)
            self._success(done.finish_reason).inc()

    # --- per state tick ---------------------------------------------------------------------------
    def state(self, hb: m.EngineHeartbeat, snapshot: m.EngineQueueSnapshot, engine_stats: dict | None) -> None:
        self._running_calls.set(hb.running_calls)
        if self.vllm is not None:
            self._running.set(hb.running_calls)
            self._waiting.set(hb.queue_depth)
            self._kv.set(hb.kv_use)
        counts: dict[str, int] = {}
        for call in snapshot.waiting:
            level = str(min(call.level, MAX_LEVELS - 1))
            counts[level] = counts.get(level, 0) + 1
        for level in self._levels_seen | counts.keys() | {"0"}:  # a level emptied reads 0, not its last count
            QUEUED_CALLS.labels(self.engine_id, level).set(counts.get(level, 0))
        self._levels_seen |= counts.keys()
        if engine_stats is not None:
            ENGINE_STATS.by_engine[self.engine_id] = {k: engine_stats[k] for k in _RETENTION_COUNTERS
                                                      if k in engine_stats}


def engine_stats_of(agent) -> dict | None:
    """The simulated engine's cumulative counters; None for a real engine (vLLM reports its own)."""
    if not is_simulated(agent.backend):
        return None
    engine = agent.stepper.engine
    return dict(engine.stats) if Capability.COUNTERS in engine.capabilities else None


_BY_ENGINE: dict[str, EngineMetrics] = {}


def metrics_for(agent) -> EngineMetrics:
    """The series of an agent (any backend), made on first use and kept by engine id."""
    found = _BY_ENGINE.get(agent.engine_id)
    if found is None:
        found = _BY_ENGINE[agent.engine_id] = EngineMetrics(agent.engine_id, agent.backend, agent.model_name)
    return found


# a label lookup costs several times the increment (docs/results/tracing_cost.json): each engine's
# children are looked up once (engine ids and finish reasons are a handful)
_completed_calls = lru_cache(maxsize=1024)(COMPLETED_CALLS.labels)


@lru_cache(maxsize=1024)
def _per_engine(engine_id: str) -> tuple:
    return tuple(c.labels(engine_id) for c in (PREEMPTIONS, RECOMPUTED_TOKENS, PREFIX_HIT_TOKENS, SERVICE_SECONDS,
                                                WAIT_SECONDS))


def count_completion(done: m.CallCompleted) -> None:
    """Every backend's completions (CompletionPublisher calls this for each CallCompleted)."""
    engine_id = done.engine_id
    _completed_calls(engine_id, done.finish_reason).inc()
    preemptions, recomputed, prefix_hits, service, wait = _per_engine(engine_id)
    preemptions.inc(done.preemptions)
    recomputed.inc(done.recomputed_tokens)
    prefix_hits.inc(done.prefix_hit_tokens)
    service.inc(done.service_s)
    wait.inc(done.wait_s)
    agent_metrics = _BY_ENGINE.get(engine_id)
    if agent_metrics is not None:
        agent_metrics.completed(done)


def observe_state(agent, interval_s: float) -> None:
    """One state tick: the engine's load, queue by level and own counters into the gauges."""
    metrics_for(agent).state(agent.heartbeat(interval_s), agent.queue_snapshot(), engine_stats_of(agent))
    UNACKED_COMPLETIONS.labels(agent.engine_id).set(agent.completions.num_unpublished)
    OUTBOX_REFUSED.labels(agent.engine_id).set(agent.completions.num_unkept)
