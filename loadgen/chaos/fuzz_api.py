"""Bad input at scale over HTTP: schemathesis against the session API's own OpenAPI document.

Runs the `schemathesis` CLI (a dev extra) against a running API, with the checks that matter here:
no 5xx (`not_a_server_error`) and nothing that breaks the document (status codes, content types,
headers and bodies must be the documented ones). Positive and negative cases are generated
(`--mode all`); `max_examples` is per operation. The coverage phase is skipped: schemathesis 4.32.5
fails inside Hypothesis on Python 3.11 there (SystemError: AST constructor recursion depth mismatch),
an error of the tool, not of the API.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
from pathlib import Path

CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_headers_conformance", "response_schema_conformance")

# The engines run modeled time as fast as the host allows, so generated calls finish at once.
FUZZ_ENV = {"TIME_SCALE": "0", "MAX_OUTPUT_TOKENS": "2048", "DEFAULT_MAX_TOKENS": "16"}


def schemathesis_binary() -> str:
    local = Path(sys.executable).with_name("schemathesis")
    found = str(local) if local.exists() else shutil.which("schemathesis")
    if not found:
        raise FileNotFoundError("schemathesis is not installed: pip install -e '.[dev]'")
    return found


async def fuzz(api_url: str, api_key: str, max_examples: int, seed: int = 0, workers: int = 2,
               timeout_s: float = 1800.0) -> dict:
    """Run schemathesis; returns cases generated, failures by check, and the exit status."""
    if not 1 <= max_examples <= 100_000:
        raise ValueError("--examples must be in 1..100000")
    out_dir = Path(tempfile.mkdtemp(prefix="autellix-fuzz-"))
    report = out_dir / "report.ndjson"
    argv = [schemathesis_binary(), "run", f"{api_url}/openapi.json", "--checks", ",".join(CHECKS),
            "--max-examples", str(max_examples), "--seed", str(seed), "--workers", str(workers),
            "--mode", "all", "--phases", "examples,fuzzing,stateful", "--header", f"Authorization: Bearer {api_key}", "--no-color",
            "--generation-database", "none", "--request-timeout", "30", "--suppress-health-check", "all",
            "--report", "ndjson", "--report-ndjson-path", str(report)]
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    try:
        stdout, _ = await asyncio.wait_for(proc.communicate(), timeout=timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    text = stdout.decode(errors="replace").replace(api_key, "<key>")
    result = {"exit_code": proc.returncode, "max_examples_per_operation": max_examples, "seed": seed,
              "checks": list(CHECKS), **summarize(report)}
    result["output_tail"] = text[-3000:]
    shutil.rmtree(out_dir, ignore_errors=True)
    return result


def summarize(ndjson_path: Path) -> dict:
    """Cases generated and check failures from schemathesis's event stream."""
    cases = 0
    server_errors = 0
    failures: dict[str, int] = {}
    operations: set[str] = set()
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
        label = recorder.get("label") or ""
        if label:
            operations.add(label)
        cases += len(recorder.get("cases") or {})
        for check_list in (recorder.get("checks") or {}).values():
            for check in check_list:
                if check.get("status") == "failure":
                    name = check.get("name", "?")
                    failures[name] = failures.get(name, 0) + 1
        for interaction in (recorder.get("interactions") or {}).values():
            status = ((interaction.get("response") or {}).get("status_code")) or 0
            if status >= 500:
                server_errors += 1
    return {"cases": cases, "failures": failures, "server_errors": server_errors, "operations": len(operations)}
