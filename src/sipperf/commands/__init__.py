"""Subcommands of ``sipperf``: one module each, each with ``register(subparsers)``."""
