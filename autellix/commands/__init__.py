"""One module per `autellix` subcommand; each defines `register(subparsers)` and sets
`handler=<callable(args) -> int>` on its parser via `set_defaults`."""
