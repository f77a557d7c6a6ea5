"""Bad input at scale over HTTP: schemathesis against the session API's own OpenAPI document.

Runs the `schemathesis` CLI (a dev extra) against a running API, with the checks that matter here:
no 5xx (`not_a_server_error`), every error answer in OpenAI's error format (`openai_error_format`,
schemathesis_hooks.py), and nothing that breaks the document (status codes, content types, headers
and bodies must be the documented ones). Positive and negative cases are generated (`--mode all`);
`max_examples` is per operation. The stateful phase follows the document's links (open a session ->
call in it -> read it -> close it, services/session_api/openapi_links.py); the harness fills the
served model into the call links' bodies, the one field the document cannot know. The coverage phase
is skipped: schemathesis 4.32.5 fails inside Hypothesis on Python 3.11 there (SystemError: AST
constructor recursion depth mismatch), an error of the tool, not of the API.

The report is scanned afterwards as well: every 4xx/5xx body is checked against the error format
again (a count that does not depend on the check having run), and cases are counted per phase.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import httpx

from loadgen.chaos.schemathesis_hooks import error_format_problem
from loadgen.live.real_servers import installed_binary

HOOKS_FILE = Path(__file__).with_name("schemathesis_hooks.py")
CHECKS = ("not_a_server_error", "openai_error_format", "status_code_conformance", "content_type_conformance",
          "response_headers_conformance", "response_schema_conformance")

# The engines run modeled time as fast as the host allows, so generated calls finish at once.
FUZZ_ENV = {"TIME_SCALE": "0", "MAX_OUTPUT_TOKENS": "2048", "DEFAULT_MAX_TOKENS": "16"}


def schemathesis_binary() -> str:
    return installed_binary("schemathesis", "pip install -e '.[dev]'")


async def document_with_model(api_url: str, api_key: str) -> dict:
    """The API's OpenAPI document, its call links given the first served model (a call in a
    session that names no served model is a 404 before it reaches the session)."""
    async with httpx.AsyncClient(base_url=api_url, timeout=10.0) as http:
        doc = (await http.get("/openapi.json")).raise_for_status().json()
        models = (await http.get("/v1/models", headers={"Authorization": f"Bearer {api_key}"})).json()
    served = [m["id"] for m in models.get("data", [])]
    if served:
        for ops in doc["paths"].values():
            for op in ops.values():
                for answer in op.get("responses", {}).values():
                    for link in answer.get("links", {}).values():
                        body = link.get("requestBody")
                        if isinstance(body, dict) and "session_id" in body:
                            body.setdefault("model", served[0])
    return doc


async def fuzz_seeds(api_url: str, api_key: str, max_examples: int, seeds: list[int], workers: int = 2,
                     timeout_s: float = 1800.0) -> dict:
    """One schemathesis run per seed (a run's cases stop growing with `max_examples` once Hypothesis
    has exhausted the small operations; another seed generates other cases); totals and each run."""
    runs = [await fuzz(api_url, api_key, max_examples, seed, workers, timeout_s) for seed in seeds]
    total = {"seeds": seeds, "max_examples_per_operation": max_examples, "checks": list(CHECKS),
             "exit_code": max(r["exit_code"] for r in runs)}
    for key in ("cases", "stateful_cases", "stateful_link_steps", "server_errors", "error_answers_scanned",
                "error_answers_off_format"):
        total[key] = sum(r.get(key, 0) for r in runs)
    for key in ("cases_by_phase", "failures", "statuses", "stateful_link_steps_by_target"):
        merged: Counter[str] = Counter()
        for r in runs:
            merged.update(r.get(key, {}))
        total[key] = dict(sorted(merged.items()))
    total["links_covered_per_run"] = [(r.get("links") or {}).get("covered") for r in runs]
    total["links"] = runs[0].get("links")
    total["runs"] = runs
    return total


async def fuzz(api_url: str, api_key: str, max_examples: int, seed: int = 0, workers: int = 2,
               timeout_s: float = 1800.0) -> dict:
    """Run schemathesis; returns cases generated (per phase), failures by check, and the exit status."""
    if not 1 <= max_examples <= 100_000:
        raise ValueError("--examples must be in 1..100000")
    out_dir = Path(tempfile.mkdtemp(prefix="autellix-fuzz-"))
    report = out_dir / "report.ndjson"
    spec = out_dir / "openapi.json"
    spec.write_text(json.dumps(await document_with_model(api_url, api_key)))
    argv = [schemathesis_binary(), "run", str(spec), "--url", api_url, "--checks", ",".join(CHECKS),
            "--max-examples", str(max_examples), "--seed", str(seed), "--workers", str(workers),
            "--mode", "all", "--phases", "examples,fuzzing,stateful", "--header", f"Authorization: Bearer {api_key}",
            "--no-color", "--generation-database", "none", "--request-timeout", "30", "--suppress-health-check", "all",
            "--report", "ndjson", "--report-ndjson-path", str(report)]
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                                                env={**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS_FILE)})
    try:
        stdout, _ = await asyncio.wait_for(proc.communicate(), timeout=timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    text = stdout.decode(errors="replace").replace(api_key, "<key>")
    result = {"exit_code": proc.returncode, "max_examples_per_operation": max_examples, "seed": seed,
              "checks": list(CHECKS), **summarize(report), **links_covered(text)}
    result["output_tail"] = text[-3000:]
    shutil.rmtree(out_dir, ignore_errors=True)
    return result


def links_covered(output: str) -> dict:
    """schemathesis's own line `API Links: 19 covered / 22 selected / 22 total (3 inferred)`."""
    found = re.search(r"API Links:\s+(\d+) covered / (\d+) selected / (\d+) total(?: \((\d+) inferred\))?", output)
    if not found:
        return {"links": None}
    covered, selected, total, inferred = (int(g) if g else 0 for g in found.groups())
    return {"links": {"covered": covered, "selected": selected, "total": total, "inferred": inferred,
                      "declared": total - inferred}}


def _body(content: object) -> bytes:
    if isinstance(content, dict) and "$base64" in content:
        return base64.b64decode(content["$base64"])
    return content.encode() if isinstance(content, str) else b""


def summarize(ndjson_path: Path) -> dict:
    """Cases (per phase), check failures, statuses and error-format problems from schemathesis's events."""
    cases_by_phase: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    transitions: Counter[str] = Counter()
    format_problems: list[str] = []
    operations: set[str] = set()
    error_answers = server_errors = 0
    if not ndjson_path.exists():
        return {"cases": 0, "failures": {"report_missing": 1}, "server_errors": 0, "operations": 0}
    for line in ndjson_path.read_text().splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        finished = event.get("ScenarioFinished")
        if not finished:
            continue
        recorder = finished.get("recorder") or {}
        if recorder.get("label"):
            operations.add(recorder["label"])
        cases = recorder.get("cases") or {}
        cases_by_phase[finished.get("phase") or "?"] += len(cases)
        for case in cases.values():
            value = case.get("value") or {}
            if case.get("is_transition_applied"):
                transitions[f"{value.get('method')} {value.get('path')}"] += 1
        for check_list in (recorder.get("checks") or {}).values():
            for check in check_list:
                if check.get("status") == "failure":
                    failures[check.get("name", "?")] += 1
        for interaction in (recorder.get("interactions") or {}).values():
            response = interaction.get("response") or {}
            status = response.get("status_code") or 0
            statuses[str(status)] += 1
            if status >= 500:
                server_errors += 1
            if status >= 400:
                error_answers += 1
                problem = error_format_problem(status, _body(response.get("content")))
                if problem:
                    format_problems.append(problem)
    return {"cases": sum(cases_by_phase.values()), "cases_by_phase": dict(cases_by_phase),
            "stateful_cases": cases_by_phase.get("stateful", 0),
            "stateful_link_steps": sum(transitions.values()), "stateful_link_steps_by_target": dict(transitions),
            "failures": dict(failures), "server_errors": server_errors, "operations": len(operations),
            "statuses": dict(sorted(statuses.items())), "error_answers_scanned": error_answers,
            "error_answers_off_format": len(format_problems), "off_format_examples": format_problems[:10]}
