from services.controller.cluster_view import ClusterView
from shared.core.starvation import StarvationConfig
from shared.protocol import messages as m


def _view(beta=3.0, **bounds):
    return ClusterView(starvation=StarvationConfig(beta=beta, min_service_s=1.0), cooldown_s=5.0,
                       snapshot_max_age_s=2.0, **bounds)


def _snapshot(engine, program, wait_s):
    return m.EngineQueueSnapshot(engine_id=engine, waiting=[m.WaitingCall(call_id="c", program_id=program,
                                                                           wait_s=wait_s)])


def test_promotes_a_starving_program_once_then_cools_down():
    view = _view()
    view.on_program_service(m.ProgramServiceUpdated(program_id="p", service_s=2.0, wait_s=1.0, epoch=0))
    view.on_snapshot(_snapshot("e0", "p", 10.0), now_s=100.0)
    promos = view.decide(now_s=100.5)
    assert [(p.program_id, p.epoch) for p in promos] == [("p", 1)]
    assert view.decide(now_s=101.0) == []  # reset totals and cooldown: no ping-pong


def test_stale_snapshots_and_stale_updates_are_ignored():
    view = _view()
    view.on_snapshot(_snapshot("e0", "p", 100.0), now_s=0.0)
    assert view.decide(now_s=10.0) == []  # the engine went silent 10 s ago
    view.epochs["p"] = 2
    view.on_program_service(m.ProgramServiceUpdated(program_id="p", service_s=9.0, wait_s=9.0, epoch=1))
    assert "p" not in view.totals


def test_beta_none_disables():
    view = _view(beta=None)
    view.on_snapshot(_snapshot("e0", "p", 1e6), now_s=0.0)
    assert view.decide(now_s=0.1) == []


def test_a_closed_session_is_forgotten_and_its_late_updates_do_not_bring_it_back():
    view = _view()
    view.on_program_service(m.ProgramServiceUpdated(program_id="s-1", service_s=2.0, wait_s=1.0, epoch=0))
    view.on_snapshot(_snapshot("e0", "s-1", 10.0), now_s=100.0)
    assert view.decide(now_s=100.5)  # promoted: epoch and cooldown remembered too
    view.on_session_closed("s-1")
    assert view.num_programs == 0
    view.on_program_service(m.ProgramServiceUpdated(program_id="s-1", service_s=3.0, wait_s=1.0, epoch=1))
    assert view.num_programs == 0


def test_a_one_call_program_is_forgotten_when_its_update_arrives():
    view = _view()
    view.on_snapshot(_snapshot("e0", "call-abc", 10.0), now_s=100.0)
    assert [p.program_id for p in view.decide(now_s=100.5)] == ["call-abc"]  # promoted while waiting
    view.on_program_service(m.ProgramServiceUpdated(program_id="call-abc", service_s=1.0, wait_s=0.0, epoch=1))
    assert view.num_programs == 0


def test_closed_ids_are_bounded():
    view = _view(max_closed=3)
    for i in range(10):
        view.on_session_closed(f"s-{i}")
    assert list(view.closed) == ["s-7", "s-8", "s-9"]
