"""The controller against a real NATS server: snapshots in, durable promotion events out."""

import asyncio
import uuid

from services.controller.handlers import ControllerService
from services.controller.settings import ControllerSettings
from shared.protocol import messages as m
from shared.protocol import subjects


async def test_promotion_is_published_on_the_audit_stream(make_bus, nats_url):
    controller_bus = await make_bus("controller")
    engine_bus = await make_bus("engine_agent")
    settings = ControllerSettings(nats_url=nats_url, starvation_beta=3.0, decision_interval_s=0.05,
                                  tenant_fair_share=False)  # the shared stack's engines listen too
    service = ControllerService(controller_bus, settings)
    await service.start()
    program = f"p{uuid.uuid4().hex[:8]}"
    got: asyncio.Queue = asyncio.Queue()

    async def on_promoted(msg):
        await got.put(msg.body)

    await engine_bus.subscribe(subjects.events_of_type(m.ProgramPromoted), on_promoted, types=(m.ProgramPromoted,))
    await engine_bus.publish(subjects.program_service(program),
                             m.ProgramServiceUpdated(program_id=program, service_s=2.0, wait_s=0.0, epoch=0))
    await engine_bus.publish(subjects.engine_queue("e0"), m.EngineQueueSnapshot(
        engine_id="e0", waiting=[m.WaitingCall(call_id="c1", program_id=program, wait_s=30.0)]))
    try:
        promo = await asyncio.wait_for(got.get(), timeout=5.0)
        assert (promo.program_id, promo.epoch) == (program, 1)
        assert promo.ratio >= 3.0
        # a malformed snapshot is rejected and the controller keeps deciding
        await engine_bus.publish_raw(subjects.engine_queue("e1"), b"\xc1 not msgpack")
        await asyncio.sleep(0.2)
        assert controller_bus.num_rejected >= 1
    finally:
        await service.stop()
