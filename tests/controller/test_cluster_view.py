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
    assert view.decide(now_s=101.0) == []  # the cooldown: not again before the table's update
    led = view.programs.get("p")
    assert (led.epoch, led.service_s, led.wait_s) == (0, 2.0, 1.0)  # the table applies it, not the view
    view.on_program_service(m.ProgramServiceUpdated(program_id="p", service_s=0.0, wait_s=0.0, epoch=1))
    assert view.decide(now_s=106.0) == []  # reset totals: no ping-pong once the cooldown is over


def test_stale_snapshots_and_stale_updates_are_ignored():
    view = _view()
    view.on_snapshot(_snapshot("e0", "p", 100.0), now_s=0.0)
    assert view.decide(now_s=10.0) == []  # the engine went silent 10 s ago
    view.on_program_service(m.ProgramServiceUpdated(program_id="p", service_s=0.0, wait_s=0.0, epoch=2,
                                                    num_completed_calls=3))  # promoted twice already
    view.on_program_service(m.ProgramServiceUpdated(program_id="p", service_s=9.0, wait_s=9.0, epoch=1,
                                                    num_completed_calls=5))
    led = view.programs.get("p")
    assert (led.epoch, led.service_s, led.wait_s) == (2, 0.0, 0.0)  # from before the promotions: stale
    view.on_program_service(m.ProgramServiceUpdated(program_id="p", service_s=9.0, wait_s=9.0, epoch=2,
                                                    num_completed_calls=2))
    assert view.programs.get("p").service_s == 0.0  # fewer completions in the same epoch: stale


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
    assert view.programs.num_closed_remembered == 3
    for i in (0, 9):
        view.on_program_service(m.ProgramServiceUpdated(program_id=f"s-{i}", service_s=1.0, wait_s=0.0, epoch=0))
    assert view.holds("s-0") and not view.holds("s-9")  # s-0's close is forgotten, s-9's is not


def test_the_controller_and_the_engines_hold_program_state_by_the_same_rules():
    """One class for S_p, W_p and the epoch: the controller's view and an engine's directory fed the
    same table updates (a promotion among them) and closes agree at every step."""
    from shared.core.program import ServiceAggregation
    from shared.engine.program_directory import CachedProgramDirectory

    view, engine = _view(), CachedProgramDirectory(ServiceAggregation.SUM)
    def feed(pid, s, w, e, n):
        view.on_program_service(m.ProgramServiceUpdated(program_id=pid, service_s=s, wait_s=w, epoch=e,
                                                        num_completed_calls=n))
        engine.apply_update(pid, s, w, {}, e, n)

    for update in [("p", 2.0, 1.0, 0, 1), ("q", 5.0, 0.5, 0, 1), ("p", 3.0, 2.0, 0, 2)]:
        feed(*update)
    view.on_snapshot(_snapshot("e0", "p", 30.0), now_s=100.0)
    [promo] = view.decide(now_s=100.1)
    feed("p", 0.0, 0.0, promo.epoch, 2)  # the table applied it
    for update in [("p", 9.0, 9.0, 0, 3), ("p", 0.5, 0.0, 1, 3), ("q", 6.0, 1.0, 0, 2)]:  # the first is stale
        feed(*update)
    view.on_session_closed("q")
    engine.close("q")
    view.on_program_service(m.ProgramServiceUpdated(program_id="q", service_s=7.0, wait_s=1.0, epoch=0))
    engine.apply_update("q", 7.0, 1.0, {}, 0)
    assert set(view.programs) == set(engine) == {"p"}
    mine, theirs = view.programs.get("p"), engine.get("p")
    assert (mine.service_s, mine.wait_s, mine.epoch) == (theirs.service_s, theirs.wait_s, theirs.epoch) == (0.5, 0.0, 1)


def test_programs_remembered_are_bounded():
    view = _view(max_programs=2)
    for i in range(5):
        view.on_program_service(m.ProgramServiceUpdated(program_id=f"s-{i}", service_s=1.0, wait_s=0.0, epoch=0))
    assert list(view.programs) == ["s-3", "s-4"] and view.num_programs == 2
