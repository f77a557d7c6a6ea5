"""Unknown variables in a service's namespaces (`AUTELLIX_` and its own prefixes such as `ENGINE_`):
pydantic-settings ignores them, so a typo (`AUTELLIX_API_KEY` for `AUTELLIX_API_KEYS`) would
otherwise pass silently and the setting keep its default."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from pydantic_settings import BaseSettings


def env_names(settings_cls: type[BaseSettings]) -> set[str]:
    """The environment variables a settings class reads (upper case: matching is case-insensitive)."""
    names = set()
    for name, field in settings_cls.model_fields.items():
        alias = field.validation_alias
        names.add((alias if isinstance(alias, str) else name).upper())
    return names


def unknown_variables(environ: Mapping[str, str], prefixes: Iterable[str],
                      known: set[str]) -> dict[str, str | None]:
    """{variable: the closest known name or None} for each variable under `prefixes` nobody reads."""
    prefixes = tuple(p.upper() for p in prefixes)
    unknown = sorted(v.upper() for v in environ if v.upper().startswith(prefixes) and v.upper() not in known)
    return {v: next(iter(difflib.get_close_matches(v, known, n=1, cutoff=0.8)), None) for v in unknown}


def describe(unknown: Mapping[str, str | None]) -> str:
    return ", ".join(v if hint is None else f"{v} (did you mean {hint}?)" for v, hint in unknown.items())
