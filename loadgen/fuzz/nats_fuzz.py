"""Forged and malformed msgpack on every subject the mesh listens on, against a live mesh:

    python -m loadgen.fuzz.nats_fuzz --json docs/results/fuzz/nats.json [--variants 4] [--seed 0]

starts `autellix up` in a /tmp state folder (ChaosStack: real processes, the embedded NATS with its
role permissions, PostgreSQL), opens a victim session with one applied call, and sends:

1. from an unauthenticated connection, and one with a wrong password: every payload (the server
   must refuse the connection, so nothing is sent);
2. from every role's connection (the five services, each engine as its own user, and the CLI) to
   each subject that role may not publish (engine e0's user: e1's heartbeat, queue snapshot and
   completions): every payload kind, forged valid messages included (the server must refuse each);
3. from the role that may publish the subject: malformed and out-of-range payloads, and on an
   engine's own subjects its valid messages naming another engine (`misattributed`); a forged
   valid message from the right role is trusted by design. One kind at a time, counting which
   consumers reported a rejection (`errors.<service>`) and which took one without a word.

Then it measures: every table of the process table's database unchanged (row by row), every
process alive, every instance answering a health check, the durable consumers' backlogs drained,
and a new session's call served and applied end to end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nats
from nats.aio.client import Client

from loadgen.fuzz import observe
from loadgen.fuzz.payloads import (
    FORGED,
    KINDS,
    MALFORMED,
    MISATTRIBUTED,
    OUT_OF_RANGE,
    Context,
    Payload,
    payloads,
)
from loadgen.fuzz.targets import Target, forger_users, may_publish, mesh_targets
from shared.bus.connection import is_permission_violation
from shared.protocol import messages as m
from shared.protocol import subjects
from shared.protocol.attribution import is_engine_subject
from shared.protocol.envelope import decode
from shared.protocol.nats_roles import ADMIN, SERVICE_ROLES

SETTLE_S = 0.5  # after a role's batch: its reports arrive within milliseconds


@dataclass
class Mesh:
    """What the fuzzer needs of a running mesh."""
    nats_address: str
    url_for: Callable[[str], str]  # role (or engine_agent.<id>) -> URL with its credentials
    database_url: str
    api_url: str
    api_key: str
    tenant: str
    engines: list[str]
    instances: dict[str, int]  # service -> processes
    processes_alive: Callable[[], dict[str, bool]]


@dataclass
class Reports:
    """`ErrorRaised` events seen, attributed to the batch being sent when they came."""
    batch: str = ""
    by_batch: Counter = field(default_factory=Counter)  # (batch, service, subject) -> reports

    async def on_error(self, raw) -> None:
        try:
            body = decode(raw.data).body
        except Exception:
            return
        if isinstance(body, m.ErrorRaised):
            self.by_batch[(self.batch, body.service, body.subject)] += 1

    async def settle(self, quiet_s: float = 0.3, max_s: float = 5.0) -> None:
        """Until no report has come for `quiet_s` (they arrive within milliseconds of the message)."""
        deadline = time.monotonic() + max_s
        last = -1
        while time.monotonic() < deadline:
            now = sum(self.by_batch.values())
            if now == last:
                return
            last = now
            await asyncio.sleep(quiet_s)

    def count(self, batch: str) -> int:
        return sum(n for (b, _, _), n in self.by_batch.items() if b == batch)


class Forger:
    """A raw connection that records the server's refusals (permission violations)."""

    def __init__(self) -> None:
        self.nc: Client | None = None
        self.violations = 0
        self.other_errors: list[str] = []

    async def on_error(self, exc: Exception) -> None:
        if is_permission_violation(exc):
            self.violations += 1
        else:
            self.other_errors.append(f"{type(exc).__name__}: {exc}"[:200])

    async def connect(self, url: str, inbox: str) -> Forger:
        self.nc = await nats.connect(url, error_cb=self.on_error, inbox_prefix=inbox, allow_reconnect=False,
                                     connect_timeout=3, max_reconnect_attempts=0)
        return self

    async def wait_violations(self, expected: int, timeout_s: float = 10.0) -> int:
        deadline = time.monotonic() + timeout_s
        while self.violations < expected and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return self.violations


def _payloads_for(target: Target, kinds: tuple[str, ...], ctx: Context, rng: random.Random,
                  variants: int) -> list[Payload]:
    if not target.types:  # a subscription whose messages are not known here: raw bytes only
        return payloads(m.HealthCheck, "random_bytes", ctx, rng, variants) if "random_bytes" in kinds else []
    return [p for cls in target.types for kind in kinds for p in payloads(cls, kind, ctx, rng, variants)]


async def _unauthenticated(mesh: Mesh, targets: list[Target], ctx: Context, rng: random.Random,
                           variants: int) -> list[dict]:
    """Connect without credentials and with a wrong password: both must be refused."""
    out = []
    wrong = mesh.url_for("router").replace("@", "x@", 1)  # the router's user, a wrong password
    for label, url in (("no credentials", mesh.nats_address), ("wrong password", wrong)):
        forger = Forger()
        try:
            await forger.connect(url, "_INBOX.fuzz")
        except Exception as exc:
            out.append({"connection": label, "refused": True, "error": f"{type(exc).__name__}: {exc}"[:200],
                        "sent": 0})
            continue
        sent = 0  # admitted: send everything it would, and report it
        for target in targets:
            for p in _payloads_for(target, KINDS, ctx, rng, variants):
                await forger.nc.publish(target.subject, p.data)
                sent += 1
        await forger.nc.flush()
        await forger.nc.close()
        out.append({"connection": label, "refused": False, "sent": sent})
    return out


async def _wrong_roles(mesh: Mesh, targets: list[Target], ctx: Context, rng: random.Random, variants: int,
                       reports: Reports) -> list[dict]:
    out = []
    for role in forger_users(mesh.engines):
        forger = await Forger().connect(mesh.url_for(role), f"_INBOX.{role}")
        reports.batch = f"wrong_role:{role}"
        sent: Counter[str] = Counter()
        for target in targets:
            if may_publish(role, target.subject):
                continue
            for p in _payloads_for(target, KINDS, ctx, rng, variants):
                await forger.nc.publish(target.subject, p.data)
                sent[p.kind] += 1
            await forger.nc.flush()
        total = sum(sent.values())
        refused = await forger.wait_violations(total)
        await asyncio.sleep(SETTLE_S)
        out.append({"role": role, "sent": total, "sent_by_kind": dict(sent), "refused_by_server": refused,
                    "reached_a_consumer": reports.count(reports.batch), "other_errors": forger.other_errors[:5]})
        await forger.nc.close()
    return out


async def _right_roles(mesh: Mesh, targets: list[Target], ctx: Context, rng: random.Random, variants: int,
                       reports: Reports) -> list[dict]:
    """Malformed and out-of-range payloads from the roles allowed to publish each subject, a kind
    at a time (a report names its subject, so one batch per kind is enough); per (subject, kind,
    consumer): sent, and rejections reported."""
    rows = []
    forgers: dict[str, Forger] = {}
    for role in forger_users(mesh.engines):
        forgers[role] = await Forger().connect(mesh.url_for(role), f"_INBOX.{role}")
    try:
        for kind in (*MALFORMED, *OUT_OF_RANGE, *MISATTRIBUTED):
            reports.batch = f"right_role:{kind}"
            for target in targets:
                if kind in MISATTRIBUTED and not is_engine_subject(target.subject):
                    continue  # elsewhere a body may name any engine (an audit event, a command)
                publishers = [r for r in forgers if may_publish(r, target.subject)]
                batch = _payloads_for(target, (kind,), ctx, rng, variants)
                if not publishers or not batch:
                    continue
                labels = []
                for p in batch:
                    role = rng.choice(publishers)
                    await forgers[role].nc.publish(target.subject, p.data)
                    labels.append(p.label)
                for role in publishers:
                    await forgers[role].nc.flush()
                rows.append({"kind": kind, "subject": target.subject, "publishers": publishers, "sent": len(batch),
                             "labels": labels, "consumers": list(target.consumers), "batch": reports.batch})
            await reports.settle()
    finally:
        for forger in forgers.values():
            await forger.nc.close()
    for row in rows:
        batch = row.pop("batch")
        row["reported"] = {service: reports.by_batch.get((batch, service, row["subject"]), 0)
                           for service in row["consumers"]}
    # every instance listening on a subject rejects malformed bytes with a report: that gives, per
    # (consumer, subject), how many instances get each message (one engine its own commands and
    # heartbeats, a queue group one, a broadcast each), and 0 where it does not listen in this
    # configuration (the router follows call events only with affinity stealing on; no engine e-fuzz)
    listeners: dict[tuple[str, str], int] = {}
    for row in rows:
        if row["kind"] in MALFORMED:
            for service, n in row["reported"].items():
                key = (service, row["subject"])
                listeners[key] = max(listeners.get(key, 0), round(n / row["sent"]))
    for row in rows:
        row["listening_instances"] = {s: listeners.get((s, row["subject"]), 0) for s in row["consumers"]}
        row["taken_silently"] = {s: max(0, row["sent"] - row["reported"][s] // n)
                                 for s, n in row["listening_instances"].items() if n}
    return rows


def _silently_taken(rows: list[dict]) -> dict[str, dict[str, list[str]]]:
    """service -> kind -> the labels of out-of-range payloads some instance took without a word."""
    out: dict[str, dict[str, list[str]]] = {}
    for row in rows:
        for service, n in row["taken_silently"].items():
            if n:
                out.setdefault(service, {}).setdefault(row["kind"], []).append(
                    f"{row['subject']}: {n} of {row['sent']} ({'; '.join(row['labels'][:4])})")
    return out


async def fuzz_nats(mesh: Mesh, seed: int = 0, variants: int = 4,
                    progress: Callable[[str], None] = lambda _: None) -> dict:
    if not 1 <= variants <= 1000:
        raise ValueError("variants must be in 1..1000")
    rng = random.Random(seed)
    t0 = time.monotonic()
    say = progress
    progress = lambda line: say(f"[{time.monotonic() - t0:5.1f} s] {line}")  # noqa: E731
    victim = await observe.session_with_one_call(mesh.api_url, mesh.api_key)
    if not victim["applied"]:
        raise RuntimeError(f"the mesh does not serve a call before fuzzing: {victim}")
    ctx = Context(program_id=victim["session_id"], tenant=mesh.tenant, engine_id=mesh.engines[0])
    targets = mesh_targets(mesh.engines, ctx.program_id)
    admin = await nats.connect(mesh.url_for(ADMIN), inbox_prefix="_INBOX.admin")
    reports = Reports()
    await admin.subscribe(subjects.all_errors(), cb=reports.on_error)
    await admin.flush()
    before = await observe.table_digests(mesh.database_url)
    progress(f"victim session {ctx.program_id}; {len(targets)} subjects; tables {', '.join(before)}")

    unauthenticated = await _unauthenticated(mesh, targets, ctx, rng, variants)
    progress(f"unauthenticated: {[(u['connection'], u['refused']) for u in unauthenticated]}")
    wrong = await _wrong_roles(mesh, targets, ctx, rng, variants, reports)
    progress(f"wrong roles: {sum(w['sent'] for w in wrong)} sent, {sum(w['refused_by_server'] for w in wrong)} refused")
    right = await _right_roles(mesh, targets, ctx, rng, variants, reports)
    progress(f"right roles: {sum(r['sent'] for r in right)} malformed or out-of-range sent")

    backlogs = await observe.wait_backlogs_drained(admin)
    after = await observe.table_digests(mesh.database_url)
    changed = observe.changed_tables(before, after)
    alive = mesh.processes_alive()
    health = await observe.health_answers(admin, list(SERVICE_ROLES))
    end_to_end = await observe.session_with_one_call(mesh.api_url, mesh.api_key)
    await admin.close()

    sent_total = (sum(u["sent"] for u in unauthenticated) + sum(w["sent"] for w in wrong)
                  + sum(r["sent"] for r in right))
    crashed = sorted(name for name, ok in alive.items() if not ok)
    unanswered = {s: {"answered": health.get(s, 0), "instances": n} for s, n in mesh.instances.items()
                  if health.get(s, 0) < n}
    stuck = {d: b for d, b in backlogs.items() if b["num_pending"] or b["num_ack_pending"]}
    return {
        "seed": seed, "variants_per_kind": variants, "duration_s": round(time.monotonic() - t0, 1),
        "subjects": [t.subject for t in targets], "untyped_subjects": [t.subject for t in targets if not t.types],
        "kinds": {"malformed": list(MALFORMED), "out_of_range": list(OUT_OF_RANGE), "forged": list(FORGED),
                  "misattributed": list(MISATTRIBUTED)},
        "messages_sent": sent_total,
        "unauthenticated": unauthenticated,
        "wrong_role": wrong,
        "wrong_role_not_refused": sum(w["sent"] - min(w["sent"], w["refused_by_server"]) for w in wrong),
        "right_role_sent": sum(r["sent"] for r in right),
        "right_role_taken_silently": _silently_taken(right),
        "state_changes": changed, "num_state_changes": len(changed),
        "crashed_processes": crashed, "health_unanswered": unanswered, "durable_backlogs": backlogs,
        "stuck_consumers": stuck, "end_to_end_after": end_to_end,
        "num_crashed_consumers": len(crashed) + len(unanswered) + len(stuck) + (0 if end_to_end["applied"] else 1),
        "right_role_rows": right,
    }


def mesh_of(stack) -> Mesh:
    """The fuzzer's view of a ChaosStack (loadgen/chaos/stack.py)."""
    engines = sorted(n.removeprefix("engine_agent-") for n in stack.names("engine_agent-"))
    instances = Counter(p.name.split("-")[0] for p in stack.processes)
    return Mesh(nats_address=stack.nats.address, url_for=stack.nats.url_for, database_url=stack.database_url,
                api_url=stack.api_url, api_key=stack.tenant_keys["acme"], tenant="acme", engines=engines,
                instances={s: instances.get(s, 0) for s in SERVICE_ROLES if instances.get(s, 0)},
                processes_alive=lambda: {p.name: p.alive() for p in stack.processes})


def _say(line: str) -> None:
    print(f"nats_fuzz: {line}", file=sys.stderr, flush=True)


async def _run(args: argparse.Namespace) -> dict:
    from loadgen.chaos.fuzz_api import FUZZ_ENV
    from loadgen.chaos.stack import ChaosStack

    stack = await ChaosStack(engines=args.engines, extra_env=FUZZ_ENV).up()
    try:
        await stack.wait_ready(60)
        return await fuzz_nats(mesh_of(stack), seed=args.seed, variants=args.variants, progress=_say)
    finally:
        if args.keep_logs:
            _say(f"service logs in {stack.keep_logs(Path(args.keep_logs))}")
        stack.down()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadgen.fuzz.nats_fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", type=int, default=4, help="payloads per message type, kind and subject")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engines", type=int, default=2)
    parser.add_argument("--json", dest="json_path", help="write the full result here")
    parser.add_argument("--keep-logs", help="copy the services' logs to this folder at the end")
    args = parser.parse_args(argv)
    if not 1 <= args.engines <= 8:
        parser.error("--engines must be in 1..8")
    result = asyncio.run(_run(args))
    summary = {k: result[k] for k in ("messages_sent", "wrong_role_not_refused", "right_role_sent",
                                      "num_state_changes", "num_crashed_consumers", "duration_s")}
    summary["unauthenticated_refused"] = all(u["refused"] for u in result["unauthenticated"])
    summary["taken_silently"] = {s: {k: len(v) for k, v in kinds.items()}
                                 for s, kinds in result["right_role_taken_silently"].items()}
    print(json.dumps(summary, indent=2))
    if args.json_path:
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(json.dumps(result, indent=2) + "\n")
        _say(f"wrote {args.json_path}")
    ok = (summary["unauthenticated_refused"] and not result["wrong_role_not_refused"]
          and not result["num_state_changes"] and not result["num_crashed_consumers"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
