"""The parser of ``hpd-agent`` and its subcommands: each reports its own mistakes, with a hint.

argparse hands an option a subcommand does not know up to the top-level parser, which then
prints the top-level usage (``hpd-agent [-h] [--version] {demo,chat,...}``) and no hint of
what was meant; Python 3.11's argparse has no ``suggest_on_error``. This parser reports the
mistake where it was made, with that subcommand's usage and the closest option or command
(``--dbb: did you mean --db?``), and exits 2 like any usage error.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from typing import Any, NoReturn, cast

__all__ = [
    "AGENT_REF_HELP",
    "CommandParser",
    "add_durability_option",
    "port_number",
    "store_option",
]

AGENT_REF_HELP = (
    "the Agent to serve, or a function returning it: package.module:NAME (importable from "
    "the current directory) or path/to/script.py:NAME"
)
"""The help of a serving command's ``MODULE:ATTR``."""


class CommandParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose subcommands (made with ``add_subparsers``, which gives them
    this class too) report unknown arguments themselves, with suggestions."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._given: list[str] = []

    def parse_known_args(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        """Parse; an argument left over is an error of this parser (its usage, a hint).

        Everything after a subcommand's name belongs to that subcommand (argparse gives the
        parser above it nothing there), so a leftover is a mistake made here.
        """
        self._given = list(args or [])
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        """Print this parser's usage and ``message``, with what was likely meant; exit 2."""
        hints = [f"{typed}: did you mean {meant}?" for typed, meant in self.suggestions()]
        super().error("; ".join([message, *hints]))

    def suggestions(self) -> list[tuple[str, str]]:
        """(what was typed, what was likely meant) for each unknown option or command."""
        options = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
        commands = [c for a in self._actions if isinstance(a.choices, dict) for c in _names(a)]
        found: list[tuple[str, str]] = []
        for arg in self._given:
            if arg == "--":
                break  # what follows is positional, whatever it looks like
            name = arg.split("=", 1)[0]
            if name.startswith("--") and not self._known(name, options):
                close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
            elif commands and not name.startswith("-"):
                # The first positional of a parser with subcommands is the command's name.
                close = [] if name in commands else difflib.get_close_matches(name, commands, n=1)
                found += [(name, close[0])] if close else []
                break
            else:
                continue
            if close:
                found.append((name, close[0]))
        return found

    def _known(self, name: str, options: list[str]) -> bool:
        # An unambiguous prefix (``--js`` for ``--json``) is accepted by argparse.
        starting = [option for option in options if option.startswith(name)]
        return name in options or (self.allow_abbrev and len(starting) == 1)


def _names(action: argparse.Action) -> list[str]:
    """The subcommand names of a subparsers action (its choices map each to its parser)."""
    return [str(name) for name in cast("dict[str, Any]", action.choices)]


def port_number(text: str) -> int:
    """A TCP port, 0 to 65535 (argparse turns a refusal into exit 2 with this message)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0-65535)")
    return port


def store_option(
    parser: argparse.ArgumentParser, help: str, *, required: bool = False, default: Any = None
) -> None:
    """``--store STORE`` on ``parser`` (``args.store``), one name for every command that
    opens a store; ``--db``, its first name for ``pending``/``answer``/``resume``, is the
    same option."""
    parser.add_argument(
        "--store",
        "--db",
        dest="store",
        metavar="STORE",
        required=required,
        default=default,
        help=help,
    )


def add_durability_option(parser: Any) -> None:
    """``--durability sync|async|exit`` of ``run`` and ``resume``."""
    from ..sessions import DURABILITY_MODES

    parser.add_argument(
        "--durability",
        choices=DURABILITY_MODES,
        help="when the run's facts are committed: sync (each before the run goes on), async "
        "(behind it), exit (when it asks a human or ends); default: the store's "
        "(docs/guarantees.md, Durability modes)",
    )
