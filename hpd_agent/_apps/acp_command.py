"""``hpd-agent acp MODULE:ATTR [--store LOC]``: serve an agent to a code editor over the Agent
Client Protocol (``hpd_agent.acp.serve_stdio``).

The editor starts the command and talks on its stdin/stdout, so nothing but protocol messages
may reach stdout: while the agent's module is imported and the store probed, ``sys.stdout``
is stderr (a banner a module prints goes there), and while it serves, descriptor 1 is too.
A failure before serving is one line on stderr: 10, the agent cannot be loaded; 8, the store
cannot be opened.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
from typing import Any

from .cli_parser import AGENT_REF_HELP, store_option

__all__ = ["add_acp_command"]


def add_acp_command(sub: Any) -> None:
    """Register ``hpd-agent acp`` on the CLI's subparsers."""
    acp = sub.add_parser(
        "acp",
        help="serve an agent to a code editor over ACP (stdio)",
        description=(
            "Serve the Agent at MODULE:ATTR (importable from the current directory) to a code "
            "editor over the Agent Client Protocol on stdin/stdout (the editor starts this "
            "command). Every question and permission its agents ask reaches the editor."
        ),
    )
    acp.add_argument("agent", metavar="MODULE:ATTR", help=AGENT_REF_HELP)
    store_option(
        acp,
        "SQLite path or postgresql:// DSN: runs and sessions survive a restart "
        "(session/load; default: none)",
    )
    acp.set_defaults(func=_cmd_acp)


def _cmd_acp(args: argparse.Namespace) -> int:
    import anyio

    from .extras import needs_extra
    from .serving import probe_store, served_agent

    with contextlib.redirect_stdout(sys.stderr):
        with needs_extra("acp", "acp"):
            from ..acp import serve_stdio
        agent = served_agent(args.agent, command="acp")
        if args.store is not None:
            probe_store(args.store)
    anyio.run(functools.partial(serve_stdio, agent, store=args.store), backend="asyncio")
    return 0
