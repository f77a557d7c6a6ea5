"""NATS credentials of the mesh's roles, and the server configuration that enforces them.

`autellix up` (and every embedded server: tests, benchmarks) keeps one password per role, and
one per engine it starts (user `engine_agent.<engine id>`), in `<nats store>/credentials.json`,
created with mode 0600 and reused on the next start (so a server restarted on the same store still
admits the running services; an engine new to the store gets a password added). Rotating: stop the
stack, delete the file, start again; every user gets a new password. The server's configuration
file (`nats.conf` beside it, also 0600) is rendered from `nats_roles.py`; docker/nats.conf is the
same rendering with `$NATS_<USER>_PASSWORD` variables that compose fills from its environment, for
the engine ids compose defines (docs/security.md: adding an engine):

    python -m runtime.nats_auth docker e0 e1 em0 v0 > docker/nats.conf   # after changing nats_roles.py
    python -m runtime.nats_auth env e0 e1 em0 v0 > .env                  # fresh passwords for compose
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from shared.protocol.nats_roles import ROLES, Permissions, engine_of_user, engine_user, permissions_of

CREDENTIALS_NAME = "credentials.json"
# a real model's request travels whole over the bus: 128K tokens of text (about 512 KB) plus JSON,
# with room to spare (NATS's default is 1 MB; it advises staying at or below 8 MB)
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024


class CredentialsError(ValueError):
    """The credentials file is unsafe or unreadable."""


def _password() -> str:
    # a letter first and hex after: the server's config parser reads "-..." or "9e5" from an
    # environment variable as a number (docker/nats.conf takes the passwords that way)
    return f"p{secrets.token_hex(24)}"


@dataclass(frozen=True)
class NatsCredentials:
    passwords: dict[str, str]  # user -> password: every role of ROLES, and engine_user(id) per engine

    @classmethod
    def generate(cls, engine_ids: Iterable[str] = ()) -> NatsCredentials:
        return cls({role: _password() for role in ROLES}).with_engines(engine_ids)

    @property
    def engine_ids(self) -> tuple[str, ...]:
        return tuple(e for e in map(engine_of_user, self.passwords) if e is not None)

    def with_engines(self, engine_ids: Iterable[str]) -> NatsCredentials:
        """These credentials plus a fresh password for each engine they do not know yet."""
        added = {engine_user(e): _password() for e in engine_ids if engine_user(e) not in self.passwords}
        return NatsCredentials({**self.passwords, **added}) if added else self

    @classmethod
    def load_or_create(cls, path: Path, engine_ids: Iterable[str] = ()) -> NatsCredentials:
        """Read the file (it must be 0600 and name every role), or create it with fresh passwords;
        an engine of `engine_ids` the file does not name gets a password, written back."""
        path = Path(path)
        if not path.exists():
            creds = cls.generate(engine_ids)
            creds.write(path)
            return creds
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise CredentialsError(f"{path} is readable by others (mode {mode:o}): chmod 600 it, or delete it "
                                   "to make new credentials")
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise CredentialsError(f"cannot read NATS credentials from {path}: {exc}") from None
        if not isinstance(data, dict) or not all(isinstance(data.get(r), str) and data[r] for r in ROLES):
            raise CredentialsError(f"{path} must map every role ({', '.join(ROLES)}) to a non-empty password; "
                                   "delete it to make new credentials")
        strays = sorted(u for u in data if u not in ROLES and (engine_of_user(u) is None or not data[u]
                                                               or not isinstance(data[u], str)))
        if strays:
            raise CredentialsError(f"{path} names users of no role (or without a password): {', '.join(strays)}; "
                                   "only the roles and engine_agent.<engine id> belong there")
        loaded = cls(dict(data))
        creds = loaded.with_engines(engine_ids)
        if creds is not loaded:
            creds.write(path)
        return creds

    def write(self, path: Path) -> None:
        write_private(Path(path), json.dumps(self.passwords, indent=2) + "\n")

    def url(self, address: str, user: str) -> str:
        """`address` (nats://host:port) with this user's (a role's) name and password in it."""
        if user not in self.passwords:
            known = ", ".join(ROLES) + "".join(f", {engine_user(e)}" for e in self.engine_ids)
            hint = (" (an engine logs in as its own user: engine_url)" if user == "engine_agent" else "")
            raise ValueError(f"unknown NATS user {user!r}{hint}; known: {known}")
        return with_credentials(address, user, self.passwords[user])

    def engine_url(self, address: str, engine_id: str) -> str:
        return self.url(address, engine_user(engine_id))


def with_credentials(address: str, user: str, password: str) -> str:
    parts = urlsplit(address)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"))


def write_private(path: Path, text: str) -> None:
    """Write a secret file as 0600 from its first byte (never briefly world-readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def password_variable(user: str) -> str:
    """`NATS_<USER>_PASSWORD`: the user upper-cased, anything but letters and digits made '_'."""
    return f"NATS_{re.sub(r'[^A-Z0-9]', '_', user.upper())}_PASSWORD"


def _list(values: list[str]) -> str:
    return json.dumps(values)


def _permissions(p: Permissions) -> str:
    publish = f"allow: {_list(p.publish)}" + (f", deny: {_list(p.publish_deny)}" if p.publish_deny else "")
    out = f"publish: {{{publish}}}, subscribe: {{allow: {_list(p.subscribe)}}}"
    if p.responses:
        out += ", allow_responses: true"
    return out


def _users(engine_ids: Iterable[str]) -> list[str]:
    users = [*ROLES, *dict.fromkeys(engine_user(e) for e in engine_ids)]
    variables: dict[str, str] = {}
    for user in users:  # two engine ids that differ only in '-' vs '_' would share one variable
        other = variables.setdefault(password_variable(user), user)
        if other != user:
            raise ValueError(f"users {other!r} and {user!r} would share {password_variable(user)}; rename one engine")
    return users


def render_config(credentials: NatsCredentials | None = None, engine_ids: Iterable[str] = ()) -> str:
    """The server's configuration: literal passwords (every user of `credentials`), or (None)
    `$NATS_<USER>_PASSWORD` variables for the roles and the engines of `engine_ids`."""
    lines = []
    for user in _users(credentials.engine_ids if credentials else engine_ids):
        password = json.dumps(credentials.passwords[user]) if credentials else f"${password_variable(user)}"
        p = permissions_of(user)
        perms = f", permissions: {{{_permissions(p)}}}" if p is not None else ""
        lines.append(f'    {{user: "{user}", password: {password}{perms}}}')
    return (f"max_payload: {MAX_PAYLOAD_BYTES}\n"
            "# every client authenticates as one role, each engine as its own user (shared/protocol/nats_roles.py)\n"
            "authorization {\n  users = [\n" + "\n".join(lines) + "\n  ]\n}\n")


def _docker_header(engine_ids: tuple[str, ...]) -> str:
    return f"""# NATS server settings of the mesh, rendered from shared/protocol/nats_roles.py by
# `python -m runtime.nats_auth docker {' '.join(engine_ids)}` (tests/security/test_compose_auth.py
# and tests/serving/test_k8s_manifests.py check it is current); one user per engine id listed there.
# Each user's password comes from the server's environment ($NATS_<USER>_PASSWORD: compose's, or the Secret's).
# max_payload: a real model's request travels whole (128K tokens of text plus JSON).
"""


def docker_config(engine_ids: Iterable[str]) -> str:
    engine_ids = tuple(engine_ids)
    return _docker_header(engine_ids) + render_config(None, engine_ids)


def env_file(credentials: NatsCredentials) -> str:
    return "".join(f"{password_variable(user)}={pw}\n" for user, pw in credentials.passwords.items())


if __name__ == "__main__":
    what, engines = (sys.argv[1], sys.argv[2:]) if len(sys.argv) >= 2 else ("", [])
    if what not in ("docker", "env"):
        sys.exit("usage: python -m runtime.nats_auth docker|env ENGINE_ID...")
    try:
        sys.stdout.write(docker_config(engines) if what == "docker" else env_file(NatsCredentials.generate(engines)))
    except ValueError as exc:  # an engine id that cannot be a subject token, or two sharing a variable
        sys.exit(f"nats_auth: {exc}")
