"""The audit stream holds every lifecycle event of a session, and `autellix events tail` reads it
(all, one session, or following new events)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

from autellix.commands.events import format_event, tail
from shared.protocol import messages as m

REPO_ROOT = Path(__file__).resolve().parents[2]


def scripted_session(sid: str) -> list:
    call = dict(call_id=f"{sid}-c1", program_id=sid)
    return [
        m.SessionOpened(session_id=sid, tenant="acme", name="demo"),
        m.CallSubmitted(**call, tenant="acme", prompt_tokens=12, max_tokens=8),
        m.CallRouted(**call, engine_id="e0", reason="least-loaded"),
        m.CallStarted(**call, engine_id="e0", wait_s=0.01),
        m.CallPreempted(**call, engine_id="e0", service_s=0.2, reason="better level waiting"),
        m.CallCompleted(**call, engine_id="e0", service_s=0.5, wait_s=0.3, preemptions=1, output_tokens=8),
        m.ProgramPromoted(program_id=sid, epoch=1, ratio=6.0),
        m.SessionClosed(session_id=sid, tenant="acme"),
    ]


async def test_tail_shows_every_lifecycle_event_of_one_session(make_bus, nats_url):
    bus = await make_bus("scripted")
    sid, other = "s" + uuid.uuid4().hex[:10], "s" + uuid.uuid4().hex[:10]
    for event in scripted_session(sid) + scripted_session(other):
        await bus.publish_event(event)
    lines: list[str] = []
    printed = await tail(nats_url, sid, follow=False, out=lines.append, as_json=True)
    types = [json.loads(line)["type"] for line in lines]
    assert printed == 8 and types == [e.TYPE for e in scripted_session(sid)]
    assert all(json.loads(line)["body"].get("program_id", sid) == sid for line in lines)


async def test_tail_prints_what_was_delivered_before_it_asked_how_much_was_left(make_bus, nats_url, monkeypatch):
    """The reader's pulls start before tail asks the consumer how much is pending: entries
    delivered by then (0 pending on the server) but not yet taken from the reader's buffer are
    still printed, not dropped as caught up."""
    from autellix.commands import events
    from shared.bus.pull import PullConsumer

    bus = await make_bus("scripted")
    sid = "s" + uuid.uuid4().hex[:10]
    for event in scripted_session(sid):
        await bus.publish_event(event)
    ask, take = events._TailReader.info, PullConsumer.take

    async def late_info(self):
        for _ in range(100):  # answer only once the server has handed everything over
            info = await ask(self)
            if info.num_pending == 0:
                return info
            await asyncio.sleep(0.02)
        raise AssertionError("never delivered")

    async def late_take(self):
        await asyncio.sleep(0.5)  # the buffer is taken from only after that answer
        return await take(self)

    monkeypatch.setattr(events._TailReader, "info", late_info)
    monkeypatch.setattr(PullConsumer, "take", late_take)
    assert await tail(nats_url, sid, follow=False, out=[].append) == 8


async def test_tail_of_a_session_with_no_events_ends_at_once(make_bus, nats_url):
    await make_bus("scripted")  # the audit stream exists
    assert await asyncio.wait_for(tail(nats_url, "s" + uuid.uuid4().hex[:10], follow=False, out=[].append), 5.0) == 0


async def test_tail_follow_prints_new_events_until_stopped(make_bus, nats_url):
    bus = await make_bus("scripted")
    sid = "s" + uuid.uuid4().hex[:10]
    lines: list[str] = []
    stop = asyncio.Event()
    task = asyncio.create_task(tail(nats_url, sid, follow=True, out=lines.append, stop=stop))
    await asyncio.sleep(0.3)
    for event in scripted_session(sid)[:3]:
        await bus.publish_event(event)
    for _ in range(100):
        if len(lines) == 3:
            break
        await asyncio.sleep(0.05)
    stop.set()
    assert await asyncio.wait_for(task, 5.0) == 3
    assert "call.routed" in lines[2] and "engine_id=e0" in lines[2]


async def test_events_tail_command(make_bus, nats_url):
    bus = await make_bus("scripted")
    sid = "s" + uuid.uuid4().hex[:10]
    for event in scripted_session(sid):
        await bus.publish_event(event)
    done = await asyncio.to_thread(subprocess.run, [
        sys.executable, "-m", "autellix", "events", "tail", "--session", sid, "--nats-url", nats_url],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert len(out) == 8 and "session.opened" in out[0] and "session.closed" in out[-1]
    bad = await asyncio.to_thread(subprocess.run, [
        sys.executable, "-m", "autellix", "events", "tail", "--session", "a.b", "--nats-url", nats_url],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "cannot be used in a NATS subject" in bad.stderr


def test_format_event_survives_bad_bytes():
    assert "<malformed:" in format_event(3, b"\xc1", as_json=False)
    assert json.loads(format_event(3, b"\xc1", as_json=True))["stream_seq"] == 3
