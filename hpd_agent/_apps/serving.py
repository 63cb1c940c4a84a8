"""What the serving commands (``serve``, ``serve --a2a``, ``mcp``) share: the token rule,
the agent they load, the store they probe, the socket they listen on and how a line of
their activity log is printed."""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

from .cli_store import EXIT_USAGE, _Fail, _load_agent

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["activity_line", "bound", "probe_store", "serve_http", "served_agent", "serving_token"]


def activity_line(line: str) -> None:
    """Print one line of a server's activity log (``hosting.Activity``) after the time of
    day, at once (the output may be a pipe)."""
    print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)


def serving_token(given: str | None, host: str, *, command: str = "") -> str | None:
    """A server command's bearer token (``--token``, else ``HPD_AGENT_TOKEN``); refuses
    (``EXIT_USAGE``) to serve beyond this machine without one. ``command`` prefixes the line."""
    from ..hosting import is_loopback

    token = given or os.environ.get("HPD_AGENT_TOKEN") or None
    if not is_loopback(host) and token is None:
        raise _Fail(
            EXIT_USAGE,
            f"{command}refusing to serve on {host} without a token: anyone on the network "
            "could run the agent. Pass --token (or set HPD_AGENT_TOKEN), or bind 127.0.0.1.",
        )
    return token


def served_agent(spec: str, command: str) -> Agent:
    """The agent ``command`` (``serve``, ``mcp``...) serves: ``spec``, its MODULE:ATTR,
    importable from the current directory."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # MODULE:ATTR is importable from the current directory
    return _load_agent(spec, command=command)


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
