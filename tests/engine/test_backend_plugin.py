"""A new simulated engine backend is its module and one row in `shared/engine/registry.py`'s
`BACKENDS`: here a builder defined in this test and one row added, then every place that names,
validates or builds backends (the engine agent's settings and factory, `autellix up`'s plan, the
simulator and its KV mode, the API's served models) takes it unchanged."""

from __future__ import annotations

import json

import pytest

from autellix.cli import main as cli_main
from loadgen.sim.engines import EngineOptions, build_engines
from runtime.catalog import StackOptions, plan
from services.engine_agent.backends import make_engine
from services.engine_agent.settings import EngineAgentSettings
from services.session_api.served_models import ServedModel
from shared.core.policy import PolicyName, SchedulingPolicy
from shared.engine import registry
from shared.engine.api import DictProgramDirectory
from shared.engine.lite import LiteEngine, LiteEngineConfig


def _one_slot(engine_id, policy, directory, spec):
    """An engine that runs one call at a time: what a new backend's builder looks like."""
    return LiteEngine(engine_id, policy, directory, LiteEngineConfig(preset=spec.preset, max_num_seqs=1))


@pytest.fixture
def one_slot(monkeypatch):
    monkeypatch.setitem(registry.BACKENDS, "one-slot", _one_slot)  # the one row
    return "one-slot"


def test_a_new_backend_is_taken_everywhere_from_its_registry_row(one_slot, tmp_path):
    policy = SchedulingPolicy(PolicyName.FCFS)
    assert one_slot in registry.simulated_backends() and registry.is_simulated(one_slot)

    agent_engine = make_engine(one_slot, "e0", policy, DictProgramDirectory(), "llama3.1-8b-a100")
    assert agent_engine.config.max_num_seqs == 1
    assert EngineAgentSettings(engine_backend=one_slot, engine_id="e0").engine_backend == one_slot

    sim_engines = build_engines(EngineOptions(kind=one_slot), policy, DictProgramDirectory(), num_engines=2)
    assert [e.engine_id for e in sim_engines] == ["e0", "e1"]

    kv_mode = ["sim", "--quiet", "--engine", one_slot, "--engines", "1", "--workload", "browser", "--rates", "1",
               "--programs", "2", "--kv-policy", "prefix-lru", "--router", "least-loaded",
               "--json", str(tmp_path / "kv.json")]
    assert cli_main(kv_mode) == 0 and json.loads((tmp_path / "kv.json").read_text())["engine"] == one_slot

    instances, _ = plan(StackOptions(backend=one_slot))
    assert instances
    assert not ServedModel(name="m", backend=one_slot).real


def test_an_unknown_backend_is_refused_everywhere_with_the_valid_names():
    with pytest.raises(ValueError, match="unknown engine backend 'tpu'; valid: lite, emulated, vllm, upstream"):
        EngineAgentSettings(engine_backend="tpu", engine_id="e0")
    with pytest.raises(ValueError, match="valid engines: lite, emulated"):
        EngineOptions(kind="tpu")
    with pytest.raises(ValueError, match="--backend must be one of lite, emulated, vllm, upstream"):
        plan(StackOptions(backend="tpu"))


def test_an_engine_step_log_is_for_a_real_engine_in_a_folder_that_exists(tmp_path):
    ok = EngineAgentSettings(engine_backend="vllm", engine_model="tiny", engine_id="e0",
                             engine_step_log=str(tmp_path / "steps.jsonl"))
    assert ok.engine_step_log.endswith("steps.jsonl")
    with pytest.raises(ValueError, match="ENGINE_STEP_LOG apply to backend vllm only"):
        EngineAgentSettings(engine_backend="lite", engine_id="e0", engine_step_log=str(tmp_path / "s.jsonl"))
    with pytest.raises(ValueError, match="ENGINE_STEP_LOG's folder '/no/such/folder' does not exist"):
        EngineAgentSettings(engine_backend="vllm", engine_model="tiny", engine_id="e0",
                            engine_step_log="/no/such/folder/steps.jsonl")
    with pytest.raises(ValueError, match="ENGINE_STEP_LOG do not apply to backend upstream"):
        EngineAgentSettings(engine_backend="upstream", engine_upstream_url="http://127.0.0.1:1", engine_id="e0",
                            engine_step_log=str(tmp_path / "s.jsonl"))
