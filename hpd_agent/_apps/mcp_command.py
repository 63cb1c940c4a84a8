"""``hpd-agent mcp MODULE:ATTR``: serve an agent as an MCP tool (``hpd_agent.mcp.mcp_server``).

Over stdio by default (an MCP client starts the command and talks on its stdin/stdout, so
nothing else is written to stdout); ``--http`` serves streamable HTTP at ``/mcp`` on
127.0.0.1, and another interface only with ``--token`` (or ``HPD_AGENT_TOKEN``), which every
request must then carry as ``Authorization: Bearer <token>``. Over HTTP the guard of every
server we ship (``hpd_agent.hosting.Guard``) decides who may reach it, on any address.
"""

from __future__ import annotations

import argparse
from typing import Any

from .cli_parser import AGENT_REF_HELP, port_number, store_option

__all__ = ["add_mcp_command"]


def add_mcp_command(sub: Any) -> None:
    """Register ``hpd-agent mcp`` on the CLI's subparsers."""
    mcp = sub.add_parser(
        "mcp",
        help="serve an agent as an MCP tool (stdio, or streamable HTTP with --http)",
        description=(
            "Serve the Agent at MODULE:ATTR (importable from the current directory) as one MCP "
            'tool named after it, taking {"query": string}. Every question its agents ask '
            "reaches the MCP client as an elicitation."
        ),
    )
    mcp.add_argument("agent", metavar="MODULE:ATTR", help=AGENT_REF_HELP)
    mcp.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp")
    mcp.add_argument("--host", default="127.0.0.1", help="with --http: interface (127.0.0.1)")
    mcp.add_argument(
        "--port", type=port_number, default=8000, help="with --http: port; 0 picks one"
    )
    store_option(mcp, "SQLite path or postgresql:// DSN: runs survive a restart (default: none)")
    mcp.add_argument("--token", default=None, help="with --http: bearer token (or HPD_AGENT_TOKEN)")
    mcp.set_defaults(func=_cmd_mcp)


def _cmd_mcp(args: argparse.Namespace) -> int:
    from .cli_store import EXIT_USAGE, _Fail
    from .extras import needs_extra
    from .serving import probe_store, served_agent, serving_token

    if not args.http and (args.token or args.host != "127.0.0.1" or args.port != 8000):
        raise _Fail(EXIT_USAGE, "mcp: --host, --port and --token go with --http")
    # Without --http (stdio) no token is used.
    token = serving_token(args.token, args.host, command="mcp: ") if args.http else None
    with needs_extra("mcp", "mcp --http" if args.http else "mcp"):
        from ..mcp import mcp_server

        if args.http:  # the MCP SDK's HTTP app, served under uvicorn
            import starlette  # noqa: F401  # pyright: ignore[reportUnusedImport]
            import uvicorn  # noqa: F401  # pyright: ignore[reportUnusedImport]
        else:
            import mcp.server.stdio  # noqa: F401  # pyright: ignore[reportUnusedImport]
    agent = served_agent(args.agent, "mcp")
    if args.store is not None:
        probe_store(args.store)
    server = mcp_server(agent, store=args.store)
    if args.http:
        return _serve_http(server, args.host, args.port, token, agent.name)
    _serve_stdio(server)
    return 0


def _serve_stdio(server: Any) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main, backend="asyncio")


def _serve_http(server: Any, host: str, port: int, token: str | None, name: str) -> int:
    from mcp.server.transport_security import TransportSecuritySettings

    from ..hosting import Guard
    from .serving import serve_http

    # The SDK's DNS-rebinding check knows only 127.0.0.1, localhost and ::1 (nothing on
    # 127.0.0.2, say): our guard decides instead, for any address, as web and A2A do.
    unchecked = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(transport_security=unchecked)
    hosts = [host.strip("[]")] if token is None else None
    guarded = Guard(app, tokens=token, hosts=hosts)
    return serve_http(guarded, host, port, what=f"{name} over MCP", path="/mcp")
