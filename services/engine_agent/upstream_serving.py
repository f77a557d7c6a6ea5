"""The engine of backend `upstream`: an OpenAI-compatible `vllm serve` this agent did not start.

Each routed call's request goes to the upstream as the client sent it, with the program's MLFQ
level as vLLM's `priority` (the server runs `--scheduling-policy priority`), the program id as
vLLM's own `session_id`, and the mesh's call id as `request_id`; the answer comes back piece by
piece as the upstream writes it. A stream's usage (tokens, cached tokens) is asked for and, when
the client did not ask for it, kept out of the answer. Each finished call leaves an accounting
record, estimated from what the agent observes (`shared/engine/upstream_accounting.py`); the
engine's load comes from its `/metrics`, scraped every `scrape_interval_s` (2 s by default: each
read costs vLLM's server loop a render of every series, measured in docs/results/real_overhead/).

Failures: an upstream that cannot be reached, times out or drops the connection before answering
gives a retryable 503; one that answers what is not JSON (or not server-sent events) gives a 502.
While its `/metrics` cannot be read the agent sends no heartbeat, so the router stops placing
calls here. The same interface as `VllmServing` (answers, `scheduler_call`, tokenizer, context).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import aiohttp

from services.engine_agent.calls import checked_estimate
from shared import tracing
from shared.core.policy import SchedulingPolicy
from shared.engine.program_directory import CachedProgramDirectory
from shared.engine.upstream_accounting import (
    PhaseMeans,
    UpstreamMetrics,
    call_priority,
    estimate_service,
    parse_metrics,
    tenant_first_priority,
    window_means,
)
from shared.logging import get_logger
from shared.protocol import messages as m

# aiohttp, not httpx: httpx (h11) parsed each server-sent event as its own chunk at about 1 ms of
# CPU apiece (py-spy, 2 cores); aiohttp's C parser hands over whatever the socket holds at once
_LOST = (aiohttp.ClientError, TimeoutError)

RESPONSES = "/v1/responses"
CONNECT_TIMEOUT_S = 5.0
SCRAPE_TIMEOUT_S = 2.0
UNHEALTHY_AFTER_S = 3.0  # no successful scrape for this long (or 2.5 scrape intervals): no heartbeat
MAX_UNCLAIMED_RECORDS = 4096


class UpstreamLost(ConnectionError):
    """The upstream went away in the middle of an answer (the client already has part of it)."""


def _error(status: int, message: str, code: str) -> tuple[int, str, bytes]:
    body = {"error": {"message": message, "type": "server_error", "code": code, "param": None}}
    return status, "application/json", json.dumps(body).encode()


@dataclass
class _Observed:
    """What the agent saw of one call."""

    sent_s: float
    thread_service_s: float
    epoch: int
    started: bool = False  # some of the answer arrived
    usage: dict | None = None
    ok: bool = False


def _usage_of(event: dict) -> dict | None:
    if isinstance(event.get("usage"), dict):
        return event["usage"]
    response = event.get("response")  # Responses API: response.completed carries it
    if isinstance(response, dict) and isinstance(response.get("usage"), dict):
        return response["usage"]
    return None


class UpstreamServing:
    def __init__(self, base_url: str, http: aiohttp.ClientSession, policy: SchedulingPolicy,
                 directory: CachedProgramDirectory, model: dict, tokenizer: str,
                 scrape_interval_s: float = 2.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = http
        self.policy = policy
        self.directory = directory
        self.served_model_name = str(model["id"])
        self.max_model_len = int(model.get("max_model_len") or 0)
        self.tokenizer_source = tokenizer or str(model.get("root") or model["id"])
        self._finished: list[dict] = []
        self._metrics = UpstreamMetrics()
        self._means = PhaseMeans()
        self._last_scrape_ok_s = time.monotonic()
        self._unhealthy_after_s = max(UNHEALTHY_AFTER_S, 2.5 * scrape_interval_s)  # two reads missed
        self.log = get_logger(upstream=self.base_url)
        # the agent's fair-share classes (EngineTenantShare.class_of); alone: every tenant class 0
        self.tenant_class_of: Callable[[str], int] = lambda tenant: 0

    @classmethod
    async def connect(cls, base_url: str, policy: SchedulingPolicy, directory: CachedProgramDirectory, *,
                      api_key: str = "", tokenizer: str = "", model_name: str = "", read_timeout_s: float = 600.0,
                      wait_s: float = 600.0, scrape_interval_s: float = 2.0) -> UpstreamServing:
        """Wait for the upstream's `/v1/models` (it may still be starting) and learn its model."""
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        http = aiohttp.ClientSession(
            headers=headers, connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
            timeout=aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_S, sock_read=read_timeout_s))
        log = get_logger(upstream=base_url)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                async with http.get(f"{base_url.rstrip('/')}/v1/models",
                                    timeout=aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S)) as resp:
                    resp.raise_for_status()
                    models = (await resp.json(content_type=None))["data"]
                break
            except (*_LOST, ValueError, KeyError, TypeError) as exc:
                if time.monotonic() > deadline:
                    await http.close()
                    raise RuntimeError(f"upstream {base_url} did not answer /v1/models in {wait_s:.0f} s: "
                                       f"{exc}") from None
                log.info("upstream_not_ready", error=str(exc))
                await asyncio.sleep(2.0)
        chosen = [d for d in models if not model_name or d.get("id") == model_name]
        if not chosen:
            await http.close()
            raise RuntimeError(f"upstream {base_url} serves {[d.get('id') for d in models]}, not {model_name!r}")
        serving = cls(base_url, http, policy, directory, chosen[0], tokenizer, scrape_interval_s)
        await serving.scrape()
        return serving

    @property
    def healthy(self) -> bool:
        return time.monotonic() - self._last_scrape_ok_s <= self._unhealthy_after_s

    # --- answers -------------------------------------------------------------------------------
    def _request(self, route: m.RouteCall) -> tuple[bytes, bool, _Observed]:
        request = json.loads(route.openai_body)
        ledger = self.directory.ledger(route.program_id)
        request["priority"] = tenant_first_priority(self.tenant_class_of(route.tenant), call_priority(
            self.policy, ledger, route.thread_id, checked_estimate(route.expected_remaining_s)))
        request["session_id"] = route.program_id
        request["request_id"] = route.call_id
        hide_usage = False
        if request.get("stream") and route.endpoint != RESPONSES:
            options = dict(request.get("stream_options") or {})
            hide_usage = not options.get("include_usage")
            options["include_usage"] = True
            request["stream_options"] = options
        observed = _Observed(sent_s=time.monotonic(), thread_service_s=ledger.thread_service(route.thread_id),
                             epoch=ledger.epoch)
        return json.dumps(request, separators=(",", ":")).encode(), hide_usage, observed

    async def answer(self, route: m.RouteCall) -> AsyncIterator[tuple[int, str, bytes]]:
        """The upstream's answer as (status, content type, piece); a record when it ends."""
        body, hide_usage, seen = self._request(route)
        answered = False
        try:
            # vLLM run with --otlp-traces-endpoint joins the call's trace from `traceparent`
            headers = {"Content-Type": "application/json", **(tracing.outgoing_headers() or {})}
            async with self._http.post(self.base_url + route.endpoint, data=body, headers=headers) as resp:
                status, ctype = resp.status, resp.headers.get("Content-Type", "")
                if status == 200 and ctype.startswith("text/event-stream"):
                    async for piece in self._events(resp, hide_usage, seen):
                        answered = True
                        yield status, ctype, piece
                    seen.ok = True
                    return
                raw = await resp.read()
                if status == 200:
                    try:
                        seen.usage = _usage_of(json.loads(raw))
                    except ValueError:
                        yield _error(502, f"upstream {self.base_url} answered {route.endpoint} with something "
                                     "that is not JSON", "upstream_malformed")
                        return
                    seen.ok = True
                answered = True
                yield status, ctype, raw
        except _LOST as exc:
            if answered:
                raise UpstreamLost(f"upstream {self.base_url} stopped mid-answer: {exc!r}") from None
            yield _error(503, f"upstream {self.base_url} unavailable ({type(exc).__name__}); retry the request",
                         "upstream_unavailable")
        finally:
            self._record(route, seen)

    async def _events(self, resp: aiohttp.ClientResponse, hide_usage: bool,
                      seen: _Observed) -> AsyncIterator[bytes]:
        """Whole server-sent events as they arrive (several at once when they queued up), the
        usage event held back when the client did not ask for it."""
        buffer = b""
        async for data in resp.content.iter_any():
            seen.started = True
            buffer += data
            end = buffer.rfind(b"\n\n")
            if end < 0:
                continue
            ready, buffer = buffer[:end + 2], buffer[end + 2:]
            if b'"usage"' in ready:
                ready = self._take_usage(ready, hide_usage, seen)
            if ready:
                yield ready
        if buffer.strip():
            raise UpstreamLost(f"upstream {self.base_url} ended its stream inside an event")

    def _take_usage(self, ready: bytes, hide_usage: bool, seen: _Observed) -> bytes:
        kept = []
        for event in ready.split(b"\n\n"):
            if not event:
                continue
            data = event.split(b"data: ", 1)[1] if b"data: " in event else b""
            usage = None
            if b'"usage"' in data:
                try:
                    parsed = json.loads(data)
                except ValueError:
                    parsed = {}
                usage = _usage_of(parsed) if isinstance(parsed, dict) else None
                if usage is not None:
                    seen.usage = usage
                    if hide_usage and not parsed.get("choices"):
                        continue  # the usage-only chunk we asked for
            kept.append(event + b"\n\n")
        return b"".join(kept)

    def _record(self, route: m.RouteCall, seen: _Observed) -> None:
        if not seen.ok and not seen.started:
            return  # refused or never reached: charged nothing (the agent closes it without a record)
        usage = seen.usage or {}
        output_tokens = usage.get("completion_tokens", usage.get("output_tokens"))
        e2e_s = time.monotonic() - seen.sent_s
        estimate = estimate_service(e2e_s, None if output_tokens is None else int(output_tokens), self._means)
        self.log.debug("upstream_call_observed", call_id=route.call_id, e2e_s=round(e2e_s, 4),
                       output_tokens=output_tokens, service_s=round(estimate.service_s, 4))
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
        self._finished.append({
            "call_id": route.call_id, "service_s": estimate.service_s, "wait_s": estimate.wait_s,
            "preemptions": 0, "prompt_tokens": int(usage.get("prompt_tokens", usage.get("input_tokens", 0)) or 0),
            "output_tokens": int(output_tokens or 0),
            "prefix_hit_tokens": int(details.get("cached_tokens") or 0), "recomputed_tokens": 0,
            "thread_service_at_submit_s": seen.thread_service_s, "submit_epoch": seen.epoch,
            # the answer itself carries vLLM's finish reason to the client; the record only tells a
            # finished call from an aborted one
            "finish_reason": "stop" if seen.ok else "abort", "aborted": not seen.ok})
        del self._finished[:-MAX_UNCLAIMED_RECORDS]

    # --- load and records ------------------------------------------------------------------------
    async def scrape(self) -> None:
        try:
            async with self._http.get(f"{self.base_url}/metrics",
                                      timeout=aiohttp.ClientTimeout(total=SCRAPE_TIMEOUT_S)) as resp:
                resp.raise_for_status()
                metrics = parse_metrics(await resp.text())
        except _LOST as exc:
            if self.healthy:
                self.log.warning("upstream_metrics_unreadable", error=str(exc))
            return
        self._means = window_means(self._metrics, metrics, self._means)
        self._metrics = metrics
        self._last_scrape_ok_s = time.monotonic()

    async def scheduler_call(self, op: str, *args) -> dict | None:
        """`drain`: finished calls' records and the engine's load. Program updates (`apply`) need
        no delivery here: priorities are computed from the agent's own directory."""
        if op != "drain":
            return None
        finished, self._finished = self._finished, []
        metrics = self._metrics
        return {"finished": finished, "running": metrics.running, "waiting": metrics.waiting,
                "kv_use": metrics.kv_use, "load": None}

    async def stop(self) -> None:
        await self._http.close()
