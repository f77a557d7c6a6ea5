"""An engine never gives up on a completion silently (issue 13, item 5): a completion JetStream has
not acked survives a SIGKILL of its agent in the outbox file, and the next agent with the same id
publishes it, once. The file's own rules (torn tail, lock, cap, compaction) on a real file; the kill
with a real agent process and a real NATS whose completions stream is gone while the call ends."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from pathlib import Path

import httpx
import pytest

from runtime.nats_server import NatsServer
from runtime.ports import free_port
from runtime.processes import ManagedProcess, base_env, python_module_argv
from services.engine_agent import outbox as ob
from services.engine_agent.outbox import CompletionOutbox, OutboxInUse, outbox_path
from shared.bus import Bus
from shared.protocol import messages as m
from shared.protocol import subjects


def _done(call_id: str, program: str = "p1") -> m.CallCompleted:
    return m.CallCompleted(call_id=call_id, program_id=program, engine_id="e0", service_s=0.25, wait_s=0.0,
                           output_tokens=8)


def test_unacked_completions_are_replayed_and_acked_ones_are_not(tmp_path):
    path = tmp_path / "e0.outbox"
    box, replay = CompletionOutbox.open(path)
    assert replay.pending == []
    for k in range(3):
        assert box.append(_done(f"c{k}"))
    box.ack("c1")
    os.close(box._lock_fd)  # as a SIGKILL would: the file stays, the lock goes
    box._lock_fd = -1
    again, replay = CompletionOutbox.open(path)
    assert [e.call_id for e in replay.pending] == ["c0", "c2"]
    assert replay.pending[0] == _done("c0")  # every field comes back
    assert again.num_pending == 2
    again.ack("c0")
    again.ack("c2")
    again.close()
    assert list(tmp_path.iterdir()) == []  # nothing pending at a clean stop: no file (nor lock) left behind


def test_a_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "e0.outbox"
    box, _ = CompletionOutbox.open(path)
    box.append(_done("whole"))
    os.write(box._fd, b'C {"call_id":"torn","progr')  # the process died inside this write
    box._fd, box._lock_fd = os.close(box._fd), os.close(box._lock_fd)
    box._fd = box._lock_fd = -1
    again, replay = CompletionOutbox.open(path)
    assert [e.call_id for e in replay.pending] == ["whole"] and replay.torn_tail
    again.append(_done("next"))  # the rewrite dropped the torn bytes: the next line is whole
    assert path.read_bytes().count(b"\n") == 2 and path.read_bytes().endswith(b"\n")
    again.close()


def test_a_second_agent_on_the_same_file_refuses(tmp_path):
    box, _ = CompletionOutbox.open(tmp_path / "e0.outbox")
    with pytest.raises(OutboxInUse, match="ENGINE_ID"):
        CompletionOutbox.open(tmp_path / "e0.outbox")
    box.close()
    CompletionOutbox.open(tmp_path / "e0.outbox")[0].close()  # released at close


def test_a_full_outbox_refuses_instead_of_growing(tmp_path):
    box, _ = CompletionOutbox.open(tmp_path / "e0.outbox", max_entries=2)
    assert box.append(_done("a")) and box.append(_done("b"))
    assert not box.append(_done("c"))
    box.ack("a")
    assert box.append(_done("c"))
    with pytest.raises(ValueError, match="at least one"):
        CompletionOutbox(tmp_path / "x", max_entries=0)
    box.close()


def test_acked_records_are_compacted_away(tmp_path, monkeypatch):
    monkeypatch.setattr(ob, "COMPACT_MIN_RECORDS", 10)
    path = tmp_path / "e0.outbox"
    box, _ = CompletionOutbox.open(path)
    box.append(_done("kept"))
    for k in range(20):
        box.append(_done(f"c{k}"))
        box.ack(f"c{k}")
    assert path.read_bytes().count(b"\n") < 10  # rewritten with what is pending, not 41 records
    box._fd, box._lock_fd = os.close(box._fd), os.close(box._lock_fd)
    box._fd = box._lock_fd = -1
    again, replay = CompletionOutbox.open(path)
    assert [e.call_id for e in replay.pending] == ["kept"]
    again.close()


def test_the_file_is_per_engine_and_per_nats_deployment(tmp_path):
    a = outbox_path(tmp_path, "e0", "nats://u:pw@h1:4222,nats://h2:4222")
    assert a == outbox_path(tmp_path, "e0", "nats://h2:4222, nats://other:secret@h1:4222")  # order, credentials
    assert a != outbox_path(tmp_path, "e1", "nats://h1:4222,nats://h2:4222")
    assert a != outbox_path(tmp_path, "e0", "nats://h1:4223,nats://h2:4222")


# --- a real agent, killed with its completion unacked --------------------------------------------
def _agent(server: NatsServer, outbox_dir: Path, log: Path, engine_id: str, metrics_port: int) -> ManagedProcess:
    env = base_env({"NATS_URL": server.url, "ENGINE_ID": engine_id, "ENGINE_BACKEND": "lite",
                    "ENGINE_OUTBOX_DIR": str(outbox_dir), "ENGINE_ID_CHECK_S": "0", "AUTELLIX_ENV": "development",
                    "HEARTBEAT_INTERVAL_S": "0.2", "METRICS_PORT": str(metrics_port)})
    return ManagedProcess(f"engine_agent-{engine_id}", python_module_argv("services.engine_agent"), env, log).start()


async def _heartbeat(bus: Bus, engine_id: str, agent: ManagedProcess, after_ns: int = 0) -> None:
    beat: asyncio.Future = asyncio.get_running_loop().create_future()

    async def on_beat(msg) -> None:
        if msg.body.started_at_ns > after_ns and not beat.done():
            beat.set_result(msg.body)
    sub = await bus.subscribe(subjects.engine_heartbeat(engine_id), on_beat, types=(m.EngineHeartbeat,))
    for _ in range(600):
        if beat.done() or not agent.alive():
            break
        await asyncio.sleep(0.05)
    await sub.unsubscribe()
    assert beat.done(), f"the agent never heartbeat: {agent.log_tail()}"
    return beat.result().started_at_ns


async def _unacked(port: int, engine_id: str) -> float | None:
    """The agent's own count of completions JetStream has not acked (its /metrics)."""
    async with httpx.AsyncClient(timeout=2.0) as http:
        text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    for line in text.splitlines():
        if line.startswith(f'autellix_engine_completions_unacked{{engine="{engine_id}"}}'):
            return float(line.split()[-1])
    return None


async def _stored(bus: Bus, program: str) -> int:
    """Completions in the stream (a server of the test's own: all of them are this call's)."""
    return (await bus.js.stream_info(subjects.COMPLETIONS_STREAM)).state.messages


async def test_a_completion_survives_a_kill_of_its_agent_and_arrives_once(tmp_path):
    server = NatsServer(tmp_path / "nats").start()
    bus = await Bus.connect(server.url, "test")
    engine_id, program, call_id = "ob" + uuid.uuid4().hex[:6], "p" + uuid.uuid4().hex[:8], "c-" + uuid.uuid4().hex
    port = free_port("127.0.0.1")
    agent = _agent(server, tmp_path / "outbox", tmp_path / "agent-1.log", engine_id, port)
    try:
        await bus.ensure_streams()
        first = await _heartbeat(bus, engine_id, agent)
        await bus.js.delete_stream(subjects.COMPLETIONS_STREAM)  # JetStream cannot take the completion now
        chunks: list[m.TokenChunk] = []

        async def on_chunk(msg) -> None:
            chunks.append(msg.body)
        reply = f"test.reply.{uuid.uuid4().hex}"
        await bus.subscribe(reply, on_chunk, types=(m.TokenChunk,))
        route = m.RouteCall(call_id=call_id, program_id=program, prompt_tokens=16, max_tokens=4,
                            reply_subject=reply)
        await bus.request(subjects.engine_commands(engine_id), m.RunCall(call=route, engine_id=engine_id),
                          timeout_s=5.0)
        for _ in range(200):
            if any(c.done for c in chunks):
                break
            await asyncio.sleep(0.05)
        assert any(c.done and c.finish_reason == "length" for c in chunks), "the client never had its answer"
        await asyncio.sleep(0.5)  # a few refused publishes
        assert await _unacked(port, engine_id) == 1.0  # owed, and said so (not given up silently)
        os.kill(agent.pid, signal.SIGKILL)
        agent.process.wait(timeout=10)
        assert "completion_publish_retried" in agent.log_tail(50)  # it was trying, and it was refused

        await bus.ensure_streams()  # JetStream is back; nothing of this call was ever stored
        assert await _stored(bus, program) == 0
        agent = _agent(server, tmp_path / "outbox", tmp_path / "agent-2.log", engine_id, port)
        await _heartbeat(bus, engine_id, agent, after_ns=first)
        for _ in range(100):
            if await _stored(bus, program) > 0:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # a second copy would have come by now
        assert await _stored(bus, program) == 1
        info = await bus.js.stream_info(subjects.COMPLETIONS_STREAM)
        stored = await bus.js.get_msg(subjects.COMPLETIONS_STREAM, info.state.last_seq)
        assert call_id.encode() in stored.data
        assert "completion_outbox_replayed" in agent.log_tail(50)
        for _ in range(20):  # the gauge follows on the next state tick
            if await _unacked(port, engine_id) == 0.0:
                break
            await asyncio.sleep(0.1)
        assert await _unacked(port, engine_id) == 0.0
    finally:
        agent.terminate()
        agent.wait_or_kill(10.0)
        await bus.close()
        server.stop()
    assert list((tmp_path / "outbox").iterdir()) == []  # acked, then a clean stop: nothing pending, no file
