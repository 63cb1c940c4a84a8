"""What the serving commands (``serve``, ``serve --a2a``, ``mcp``) share: the named tokens
and the rule that needs one, the answer policy, the agent they load, the store they probe
and the socket they listen on."""

from __future__ import annotations

import os
import socket
import sys
from typing import TYPE_CHECKING, Any

from .cli_store import EXIT_USAGE, _Fail, _load_agent

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = [
    "TOKEN_HELP",
    "add_token_option",
    "bound",
    "probe_store",
    "serve_http",
    "served_agent",
    "serving_policy",
    "serving_tokens",
]

TOKEN_HELP = (
    "a bearer token, NAME=SECRET (repeatable: answers are recorded as given by NAME) or a "
    "bare SECRET (named 'token'); default HPD_AGENT_TOKEN, read the same way"
)


def add_token_option(parser: Any, help: str = TOKEN_HELP) -> None:
    """Add the repeatable ``--token`` of a server command to ``parser``."""
    parser.add_argument(
        "--token", action="append", default=None, metavar="[NAME=]SECRET", help=help
    )


def _named(value: str) -> tuple[str, str]:
    """``NAME=SECRET`` as (NAME, SECRET); a bare secret (one holding no ``=`` but its
    base64 padding, ``abc==``, too) is named ``TOKEN``."""
    from ..hosting import TOKEN

    name, sep, secret = value.partition("=")
    if not sep or not secret.strip("="):
        return TOKEN, value
    return name, secret


def serving_tokens(
    given: list[str] | None, host: str, *, command: str = ""
) -> dict[str, str] | None:
    """A server command's bearer tokens by name (``--token``, repeatable, else
    ``HPD_AGENT_TOKEN``); None when there are none. Refuses (``EXIT_USAGE``) an empty name
    or secret, a name or a secret given twice, and serving beyond this machine without a
    token. ``command`` prefixes the line."""
    from ..hosting import is_loopback

    values = given or [v for v in [os.environ.get("HPD_AGENT_TOKEN")] if v]
    tokens: dict[str, str] = {}
    for value in values:
        name, secret = _named(value)
        if not name.strip() or not secret.strip():
            raise _Fail(EXIT_USAGE, f"{command}--token needs NAME=SECRET or SECRET, not empty")
        if name in tokens:
            raise _Fail(EXIT_USAGE, f"{command}--token: the name {name!r} is given twice")
        if secret in tokens.values():
            raise _Fail(EXIT_USAGE, f"{command}--token: two names share one secret")
        tokens[name] = secret
    if not is_loopback(host) and not tokens:
        raise _Fail(
            EXIT_USAGE,
            f"{command}refusing to serve on {host} without a token: anyone on the network "
            "could run the agent. Pass --token (or set HPD_AGENT_TOKEN), or bind 127.0.0.1.",
        )
    return tokens or None


def serving_policy(ref: str | None, *, command: str = "") -> Any:
    """The answer policy at ``--policy MODULE:ATTR`` (None without one); a bad one is a
    usage error (``EXIT_USAGE``), said before anything is served."""
    if ref is None:
        return None
    from ..exceptions import UserError
    from ..governance import load_policy

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # MODULE:ATTR is importable from the current directory
    try:
        return load_policy(ref)
    except UserError as e:
        raise _Fail(EXIT_USAGE, f"{command}{e}") from None


def served_agent(spec: str, *, command: str | None = "serve") -> Agent:
    """The agent a command serves or runs, ``spec`` importable from the current directory;
    ``command`` names it in the error's hint (``command MODULE:ATTR``; None: ``--agent``)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # MODULE:ATTR is importable from the current directory
    return _load_agent(spec, served=command)


def probe_store(location: str) -> None:
    """Open and close the store now: a bad one is one error line, before serving."""
    import anyio

    from ..store import open_store
    from .extras import needs_store_extra

    needs_store_extra(location)
    store = open_store(location)
    anyio.run(store.aclose)


def bound(host: str, port: int) -> socket.socket | None:
    """A socket listening on ``host:port`` (None, said on stderr, when it cannot)."""
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bare, port))
    except (OSError, OverflowError) as e:
        sock.close()
        print(f"error: cannot listen on {host}:{port}: {e}", file=sys.stderr)
        return None
    sock.listen(128)
    return sock


def serve_http(app: Any, host: str, port: int, *, what: str, path: str = "") -> int:
    """Serve ``app`` under uvicorn on ``host:port`` until stopped, once a line says where
    (``Serving {what} on http://host:port{path}``); the exit status."""
    import uvicorn

    sock = bound(host, port)
    if sock is None:
        return 2
    bare = host.strip("[]")
    shown = f"[{bare}]" if sock.family == socket.AF_INET6 else bare
    print(f"Serving {what} on http://{shown}:{sock.getsockname()[1]}{path}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[sock])
    return 0
