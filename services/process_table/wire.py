"""Wire messages <-> process-table records (decoding checks beyond the codec's type checks)."""

from __future__ import annotations

import time

from services.process_table.fold import Completion
from services.process_table.views import ProgramView, ServiceUpdate
from shared.core.mlfq import MlfqConfig
from shared.protocol import messages as m
from shared.protocol.ids import DEFAULT_TENANT_ID


def completion_from_wire(msg: m.CallCompleted) -> Completion:
    """The codec has held every field to the wire's bounds (the program id, which names a subject
    of the update event, to one subject token), so any decoded completion converts."""
    return Completion(
        call_id=msg.call_id, program_id=msg.program_id, thread_id=msg.thread_id,
        parent_thread_id=msg.parent_thread_id, tenant_id=msg.tenant or DEFAULT_TENANT_ID,
        service_s=msg.service_s, wait_s=msg.wait_s,
        thread_service_at_submit_s=msg.thread_service_at_submit_s, submit_epoch=msg.submit_epoch,
        prompt_tokens=msg.prompt_tokens, output_tokens=msg.output_tokens,
        prefix_hit_tokens=msg.prefix_hit_tokens, engine_id=msg.engine_id or None,
        completed_at_s=msg.completed_at_ns / 1e9 if msg.completed_at_ns else None,
        completed_calls_before=msg.completed_calls_before,
    )


def service_updated(update: ServiceUpdate) -> m.ProgramServiceUpdated:
    return m.ProgramServiceUpdated(
        program_id=update.program_id, service_s=update.service_s, wait_s=update.wait_s, epoch=update.epoch,
        thread_service_s=update.thread_service_s, num_completed_calls=update.num_completed_calls,
        updated_at_ns=time.time_ns())


def service_updated_from_view(view: ProgramView) -> m.ProgramServiceUpdated:
    return m.ProgramServiceUpdated(
        program_id=view.program_id, service_s=view.service_s, wait_s=view.wait_s, epoch=view.epoch,
        thread_service_s=view.thread_service_s, num_completed_calls=view.num_completed_calls,
        updated_at_ns=time.time_ns())


def _ns(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1e9)


def session_info(view: ProgramView, mlfq: MlfqConfig, expected_remaining_s: float | None = None,
                 hint_scale_s: float | None = None) -> m.SessionInfo:
    return m.SessionInfo(
        session_id=view.program_id, tenant=view.tenant_id, name=view.name, workload_class=view.workload_class,
        state=view.state, service_s=view.service_s, wait_s=view.wait_s, level=mlfq.level_for(view.service_s),
        epoch=view.epoch, num_calls=view.num_completed_calls, num_completed_calls=view.num_completed_calls,
        thread_service_s=view.thread_service_s, primary_engine=view.primary_engine,
        opened_at_ns=_ns(view.created_at_s) or 0, closed_at_ns=_ns(view.closed_at_s),
        expected_remaining_s=expected_remaining_s, hint_scale_s=hint_scale_s, total_service_s=view.total_service_s)


def session_opened(view: ProgramView, expected_remaining_s: float | None = None,
                   hint_scale_s: float | None = None) -> m.SessionOpened:
    return m.SessionOpened(session_id=view.program_id, tenant=view.tenant_id, name=view.name,
                           workload_class=view.workload_class, opened_at_ns=_ns(view.created_at_s) or 0,
                           expected_remaining_s=expected_remaining_s, hint_scale_s=hint_scale_s)


def session_closed(view: ProgramView) -> m.SessionClosed:
    return m.SessionClosed(session_id=view.program_id, tenant=view.tenant_id,
                           reason=view.close_reason or "client", closed_at_ns=_ns(view.closed_at_s) or 0)
