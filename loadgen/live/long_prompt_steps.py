"""What the mesh does with a long prompt, step by step: CPU time of each step a 100K-character chat
request takes through the API, the bus and the engine agent (backend upstream or vllm), with the
same functions the services run, on the tiny model's tokenizer.

    python -m loadgen.live.long_prompt_steps [--chars 100000] [--json PATH]

CPU time of the calling thread (`time.thread_time`), best and median of `--repeats`, so the
figures hold on a loaded host; the engine's own work (vLLM tokenizes and prefills the prompt
again) is not here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from loadgen.results_json import write_json
from services.session_api.model_tokenizer import ModelTokenizers, token_segments
from services.session_api.schemas import ChatCompletionRequest
from shared.engine.tiny_model import make_tiny_model
from shared.protocol import messages as m
from shared.protocol.envelope import decode, encode

WORDS = "the quick brown fox jumps over the lazy dog plan the next step read the file run the tests".split()


def _cpu_ms(step, repeats: int) -> tuple[object, float, float]:
    times, out = [], None
    for _ in range(repeats):
        t = time.thread_time()
        out = step()
        times.append((time.thread_time() - t) * 1e3)
    return out, round(min(times), 2), round(statistics.median(times), 2)


async def measure(chars: int, repeats: int, model_dir: Path) -> dict:
    text = " ".join(random.Random(0).choice(WORDS) for _ in range(chars // 3))[:chars]
    raw = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": text}], "max_tokens": 8}).encode()
    tok = await ModelTokenizers().get(str(model_dir))
    steps: dict[str, tuple[float, float]] = {}

    def run(label: str, step):
        out, best, med = _cpu_ms(step, repeats)
        steps[label] = (best, med)
        return out

    body = run("API: parse and validate the request (pydantic)", lambda: ChatCompletionRequest.model_validate_json(raw))
    fwd = run("API: the forwarded body (model_dump + json)", lambda: json.dumps(
        body.model_dump(exclude_unset=True, mode="json"), separators=(",", ":")).encode())
    messages = [x.model_dump(exclude_none=True) for x in body.messages]

    def render() -> list[int]:
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    ids = run("API: chat template + tokenize (in a thread)", render)
    segments = run("API: prefix segment hashes", lambda: token_segments(ids, salt="tenant-salt"))
    route = m.RouteCall(call_id="c" * 32, program_id="p" * 32, thread_id="main", tenant="t", prompt_tokens=len(ids),
                        prompt_segments=list(segments), max_tokens=8, stream=True, reply_subject="inbox.c",
                        submitted_at_ns=time.time_ns(), model="tiny", openai_body=fwd, endpoint="/v1/chat/completions")
    route_bytes = run("bus: RouteCall encode (API)", lambda: encode(route, "session_api", 1))
    run("bus: RouteCall decode (router)", lambda: decode(route_bytes))
    run_call = m.RunCall(call=route, engine_id="e0", route_reason="least_load", routed_at_ns=time.time_ns())
    run_bytes = run("bus: RunCall encode (router)", lambda: encode(run_call, "router", 1))
    run("bus: RunCall decode (engine agent)", lambda: decode(run_bytes))
    run("engine agent: request body loads + dumps", lambda: json.dumps(
        json.loads(fwd) | {"priority": 1, "session_id": "p", "request_id": "c"}, separators=(",", ":")).encode())
    return {"chars": chars, "prompt_tokens": len(ids), "segments": len(segments), "body_bytes": len(fwd),
            "route_call_bytes": len(route_bytes), "run_call_bytes": len(run_bytes), "repeats": repeats,
            "cpu_ms_best_median": steps, "total_best_ms": round(sum(b for b, _ in steps.values()), 2)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadgen.live.long_prompt_steps", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--chars", type=int, default=100_000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="autellix-long-") as tmp:
        result = asyncio.run(measure(args.chars, args.repeats, make_tiny_model(Path(tmp) / "tiny-model")))
    result = {"benchmark": "CPU of each mesh step for one long prompt",
              "command": "python -m loadgen.live.long_prompt_steps " + " ".join(argv or sys.argv[1:]), **result}
    print(json.dumps(result, indent=1))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
