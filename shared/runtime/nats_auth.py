"""NATS credentials of the mesh's roles, and the server configuration that enforces them.

`autellix up` (and every embedded server: tests, benchmarks) keeps one password per role in
`<nats store>/credentials.json`, created with mode 0600 and reused on the next start (so a server
restarted on the same store still admits the running services). Rotating: stop the stack, delete
the file, start again; every role gets a new password. The server's configuration file
(`nats.conf` beside it, also 0600) is rendered from `nats_roles.PERMISSIONS`; docker/nats.conf is
the same rendering with `$NATS_<ROLE>_PASSWORD` variables that compose fills from its environment:

    python -m shared.runtime.nats_auth docker > docker/nats.conf   # after changing nats_roles.py
    python -m shared.runtime.nats_auth env > .env                  # fresh passwords for compose
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from shared.runtime.nats_roles import ADMIN, PERMISSIONS, ROLES, Permissions

CREDENTIALS_NAME = "credentials.json"
# a real model's request travels whole over the bus: 128K tokens of text (about 512 KB) plus JSON,
# with room to spare (NATS's default is 1 MB; it advises staying at or below 8 MB)
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024


class CredentialsError(ValueError):
    """The credentials file is unsafe or unreadable."""


@dataclass(frozen=True)
class NatsCredentials:
    passwords: dict[str, str]  # role -> password

    @classmethod
    def generate(cls) -> NatsCredentials:
        # a letter first and hex after: the server's config parser reads "-..." or "9e5" from an
        # environment variable as a number (docker/nats.conf takes the passwords that way)
        return cls({role: f"p{secrets.token_hex(24)}" for role in ROLES})

    @classmethod
    def load_or_create(cls, path: Path) -> NatsCredentials:
        """Read the file (it must be 0600 and name every role), or create it with fresh passwords."""
        path = Path(path)
        if not path.exists():
            creds = cls.generate()
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
        return cls({role: data[role] for role in ROLES})

    def write(self, path: Path) -> None:
        write_private(Path(path), json.dumps(self.passwords, indent=2) + "\n")

    def url(self, address: str, role: str) -> str:
        """`address` (nats://host:port) with this role's user and password in it."""
        if role not in self.passwords:
            raise ValueError(f"unknown NATS role {role!r}; known: {', '.join(ROLES)}")
        return with_credentials(address, role, self.passwords[role])


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


def password_variable(role: str) -> str:
    return f"NATS_{role.upper()}_PASSWORD"


def _list(values: list[str]) -> str:
    return json.dumps(values)


def _permissions(p: Permissions) -> str:
    publish = f"allow: {_list(p.publish)}" + (f", deny: {_list(p.publish_deny)}" if p.publish_deny else "")
    out = f"publish: {{{publish}}}, subscribe: {{allow: {_list(p.subscribe)}}}"
    if p.responses:
        out += ", allow_responses: true"
    return out


def render_config(credentials: NatsCredentials | None = None) -> str:
    """The server's configuration: literal passwords, or (None) `$NATS_<ROLE>_PASSWORD` variables."""
    users = []
    for role in ROLES:
        password = json.dumps(credentials.passwords[role]) if credentials else f"${password_variable(role)}"
        perms = f", permissions: {{{_permissions(PERMISSIONS[role])}}}" if role != ADMIN else ""
        users.append(f'    {{user: "{role}", password: {password}{perms}}}')
    return (f"max_payload: {MAX_PAYLOAD_BYTES}\n"
            "# every client authenticates as one role (shared/runtime/nats_roles.py)\n"
            "authorization {\n  users = [\n" + "\n".join(users) + "\n  ]\n}\n")


DOCKER_HEADER = """# NATS server settings of the mesh, rendered from shared/runtime/nats_roles.py by
# `python -m shared.runtime.nats_auth docker` (tests/security/test_compose_auth.py checks it is current).
# Each role's password comes from the server's environment ($NATS_<ROLE>_PASSWORD, set by compose).
# max_payload: a real model's request travels whole (128K tokens of text plus JSON).
"""


def docker_config() -> str:
    return DOCKER_HEADER + render_config(None)


def env_file(credentials: NatsCredentials) -> str:
    return "".join(f"{password_variable(role)}={pw}\n" for role, pw in credentials.passwords.items())


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) == 2 else ""
    if what not in ("docker", "env"):
        sys.exit("usage: python -m shared.runtime.nats_auth docker|env")
    sys.stdout.write(docker_config() if what == "docker" else env_file(NatsCredentials.generate()))
