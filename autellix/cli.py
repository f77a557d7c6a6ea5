"""The `autellix` command: the one front door that sees every layer.

Each subcommand lives in its own module under `autellix/commands/` and exposes
`register(subparsers)`; this file only discovers and dispatches them.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import pkgutil
import sys

import autellix.commands as commands_pkg


def package_version() -> str:
    # the installed distribution's version (pyproject.toml), so a running copy says what it is
    try:
        return importlib.metadata.version("autellix")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autellix", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"autellix {package_version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands_pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands_pkg.__name__}.{info.name}")
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except (ValueError, FileNotFoundError) as exc:  # bad input: a clear message, no traceback
        print(f"autellix {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
