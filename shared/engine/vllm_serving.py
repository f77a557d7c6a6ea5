"""A real vLLM engine served inside this process: the `vllm` backend's engine.

vLLM's `AsyncLLM` runs the engine core in a child process (vLLM's own design: the model loop never
waits on this process's event loop) with Autellix's scheduler class inside it; vLLM's own OpenAI
application (chat templates, tool parsers, structured outputs, stop strings, logprobs, usage, the
Responses API, its error answers) runs here over that engine client and is called in-process as an
ASGI app, with no socket in between. So every OpenAI field means what it means under `vllm serve`,
and any `vllm serve` flag can be given (`extra_args`).

Program state reaches the scheduler in the engine core through vLLM's utility calls: the engine
core answers a utility request by looking the method up by name, and `vllm_adapter` gives it one,
`autellix_call(op, *args)`, that forwards to the scheduler through the one table of ops
(`vllm_ops.HANDLERS`). One of the modules that import vLLM.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")  # our structlog owns this process's logging

from vllm.entrypoints.launchers.api_server.app_state import init_app_state  # noqa: E402
from vllm.entrypoints.launchers.api_server.entry import build_async_engine_client  # noqa: E402
from vllm.entrypoints.launchers.app import build_app  # noqa: E402
from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

from shared.asgi_body import body_then  # noqa: E402
from shared.engine.program_sched import CONFIG_KEY  # noqa: E402
from shared.engine.vllm_adapter import SCHEDULER_CALL, scheduler_qualname  # noqa: E402
from shared.engine.vllm_ops import scheduler_op  # noqa: E402

# flags our engine sets itself: a client of this module may not override them
_OWN_FLAGS = ("--scheduler-cls", "--scheduling-policy", "--additional-config", "--served-model-name", "--model")


@dataclass(frozen=True)
class VllmServeConfig:
    model: str  # a folder or a hub id
    served_model_name: str
    scheduler_settings: dict[str, Any]  # SchedulerSettings.to_config()
    extra_args: tuple[str, ...] = ()  # any other `vllm serve` flags, e.g. ("--max-model-len", "4096")
    scheduler_kind: str = "autellix"  # or "stock-fcfs" / "stock-priority" (baselines)

    def argv(self) -> list[str]:
        for arg in self.extra_args:
            if arg.split("=", 1)[0] in _OWN_FLAGS:
                raise ValueError(f"vLLM flag {arg.split('=', 1)[0]} is set by the engine agent; remove it")
        return ["--model", self.model, "--served-model-name", self.served_model_name,
                "--scheduler-cls", scheduler_qualname(self.scheduler_kind),
                "--scheduling-policy", "fcfs" if self.scheduler_kind == "stock-fcfs" else "priority",
                "--additional-config", json.dumps({CONFIG_KEY: self.scheduler_settings}),
                "--enable-prompt-tokens-details",  # usage.prompt_tokens_details.cached_tokens, as OpenAI
                *self.extra_args]


def parse_serve_args(config: VllmServeConfig):
    """vLLM's own `vllm serve` argument parser and checks, so a bad flag fails as it would there."""
    args = make_arg_parser(FlexibleArgumentParser(prog="vllm serve")).parse_args(config.argv())
    validate_parsed_serve_args(args)
    return args


@dataclass
class HttpAnswer:
    """vLLM's answer to one request as it is produced: status and content type, then body pieces."""

    status: int = 0
    content_type: str = ""
    pieces: asyncio.Queue = field(default_factory=asyncio.Queue)  # bytes, then None at the end


class VllmServing:
    def __init__(self, args, engine_client, app, exit_stack: contextlib.AsyncExitStack) -> None:
        self.args = args
        self.engine = engine_client
        self.app = app
        self._exit_stack = exit_stack
        self.model_config = engine_client.model_config

    @classmethod
    async def start(cls, config: VllmServeConfig) -> VllmServing:
        args = parse_serve_args(config)
        stack = contextlib.AsyncExitStack()
        try:
            engine = await stack.enter_async_context(build_async_engine_client(args))
            tasks = await engine.get_supported_tasks()
            app = build_app(args, tasks, engine.model_config)
            await init_app_state(engine, app.state, args, tasks)
        except BaseException:
            await stack.aclose()
            raise
        return cls(args, engine, app, stack)

    @property
    def max_model_len(self) -> int:
        return int(self.model_config.max_model_len)

    @property
    def healthy(self) -> bool:
        return True  # the agent's drain deadline tells when the engine core stops answering

    @property
    def tokenizer_source(self) -> str:
        return str(self.model_config.tokenizer)

    async def scheduler_call(self, op: str, *args: Any) -> Any:
        """Run `op` on the scheduler inside the engine core (vllm_ops.HANDLERS); an unknown op is
        refused here, before it crosses to the engine process."""
        return await self.engine.engine_core.call_utility_async(SCHEDULER_CALL, scheduler_op(op).value, *args)

    async def request(self, path: str, body: bytes) -> AsyncIterator[tuple[int, str, bytes]]:
        """POST `body` to vLLM's app at `path`; yields (status, content type, body piece) as vLLM
        writes them. Closing the iterator early is a client disconnect: vLLM aborts the request."""
        answer = HttpAnswer()
        disconnected = asyncio.Event()

        async def client_gone() -> dict:
            await disconnected.wait()
            return {"type": "http.disconnect"}
        receive = body_then(body, client_gone)

        async def send(message: dict) -> None:
            if message["type"] == "http.response.start":
                answer.status = message["status"]
                for name, value in message.get("headers", ()):
                    if name.lower() == b"content-type":
                        answer.content_type = value.decode("latin-1")
                await answer.pieces.put(b"")  # the status line is known
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    await answer.pieces.put(message["body"])
                if not message.get("more_body", False):
                    await answer.pieces.put(None)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
                 "root_path": "", "headers": [(b"content-type", b"application/json"),
                                              (b"content-length", str(len(body)).encode())],
                 "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 0)}

        async def run_app() -> None:
            try:
                await self.app(scope, receive, send)
            finally:
                await answer.pieces.put(None)

        task = asyncio.get_running_loop().create_task(run_app())
        try:
            pieces, ended = answer.pieces, False
            while not ended:
                piece = await pieces.get()
                if piece is None:
                    break
                while piece and not pieces.empty():  # pieces already written go on together:
                    more = pieces.get_nowait()      # fewer messages, and none waits for another
                    if more is None:
                        ended = True
                        break
                    piece += more
                yield answer.status, answer.content_type, piece
            await task  # an exception inside vLLM's app surfaces here
        finally:
            disconnected.set()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def stop(self) -> None:
        await self._exit_stack.aclose()
