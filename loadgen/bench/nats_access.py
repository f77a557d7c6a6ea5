"""A stack's NATS URL for a given role, when its server asks for credentials.

`autellix up` keeps one password per role in `<state>/nats/credentials.json` and writes the
read-only `cli` role's URL to up.json. A benchmark sends what services send (a direct engine call
is the router's message, a ceiling run publishes to a stream of its own), so it connects as
`admin`, and a replica it starts beside the stack as that service's role. Without the file (an
external NATS, or a server without auth) the URL is used as it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit


def role_url(state_dir: Path, url: str, role: str) -> str:
    path = Path(state_dir) / "nats" / "credentials.json"
    if not path.is_file():
        return url
    password = json.loads(path.read_text()).get(role)
    if not password:
        raise RuntimeError(f"{path} has no password for the NATS role {role!r}")
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{quote(role, safe='')}:{quote(password, safe='')}@{host}"))
