"""The ``hpd-agent`` command: one subcommand per function below, registered in ``_parser``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpd-agent", description="Nested multi-agent orchestration with a human in the loop."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    version = sub.add_parser("version", help="print the version")
    version.set_defaults(func=_cmd_version)
    return parser


def _cmd_version(args: argparse.Namespace) -> int:
    from . import __version__

    print(__version__)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hpd-agent`` command; returns the exit status."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
