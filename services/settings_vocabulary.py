"""Every variable the mesh's services read, and the start-up report of the ones nobody reads.

One environment often feeds every service (`autellix up` passes its own to each child; compose
shares an anchor), so a variable counts as known when any service reads it: `ENGINE_TTL_S` is the
router's and the API's, not a typo of the engine agent's."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TypeVar

from services.controller.settings import ControllerSettings
from services.engine_agent.settings import EngineAgentSettings
from services.process_table.settings import ProcessTableSettings
from services.router.settings import RouterSettings
from services.session_api.settings import SessionApiSettings
from shared.logging import get_logger
from shared.service_process import run_service
from shared.settings import MeshSettings
from shared.settings_check import describe, env_names, unknown_variables

S = TypeVar("S", bound=MeshSettings)

SERVICE_SETTINGS = (ControllerSettings, EngineAgentSettings, ProcessTableSettings, RouterSettings,
                    SessionApiSettings)


def known_variables() -> set[str]:
    return set().union(*(env_names(cls) for cls in SERVICE_SETTINGS))


def report_unknown_variables(settings: MeshSettings, environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """Log one warning naming the variables under this service's prefixes that nobody reads."""
    unknown = unknown_variables(os.environ if environ is None else environ, settings.env_prefixes,
                                known_variables())
    if unknown:
        get_logger().warning("unknown_variables", variables=list(unknown), detail=describe(unknown),
                             prefixes=list(settings.env_prefixes))
    return unknown


def run_mesh_service(name: str, settings: S, serve: Callable[[S], object], **options) -> int:
    """A mesh service's process (`run_service`), its unknown variables reported at start-up."""
    return run_service(name, settings, serve, report_unknown=report_unknown_variables, **options)
