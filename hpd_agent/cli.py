"""The ``hpd-agent`` command."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hpd-agent`` command."""
    args = sys.argv[1:] if argv is None else argv
    print("hpd-agent: commands arrive with the console issue", args)
    return 0
