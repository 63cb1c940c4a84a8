"""Test-suite guards and fixtures.

- No real LLM request can leave: model requests are forbidden process-wide and every socket
  connection to a non-loopback address raises.
- Async tests run on both asyncio and trio (anyio's pytest plugin), unless a module pins
  ``anyio_backend``.
- A test must leave no process-wide hook behind (``hpd_agent.hooks.install``, or the
  OpenTelemetry default hook of a global SDK): a later test in the same worker would run
  with it (a count of calls or bytes per run would then measure the hook too). One that does
  errors at its teardown, naming the hooks.
- ``location``: a store's location, SQLite and PostgreSQL in turn (the PostgreSQL fixtures
  of tests/_pg.py are every test's); a module whose store needs more defines its own.
- The whole suite runs in parallel workers (pytest-xdist, ``-n auto`` in pyproject.toml):
  one more than the machine's cores, since most tests wait on a child process or a socket;
  a subset (files or ``-k`` named) runs in this process, where it starts at once.
"""

from __future__ import annotations

import inspect
import ipaddress
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _pg import fresh_postgres, postgres_dsn  # noqa: F401  (fixtures, for every test)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["HPD_AGENT_ALLOW_MODEL_REQUESTS"] = "0"

from hpd_agent.hooks import process_hooks
from hpd_agent.models import set_allow_model_requests

set_allow_model_requests(False)

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _is_loopback(host: Any) -> bool:
    if host in ("localhost", "", None):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def _check(sock: socket.socket, address: Any) -> None:
    if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address[0]):
        raise OSError(f"network access outside loopback is blocked in tests: {address!r}")


def _guarded_connect(self: socket.socket, address: Any) -> None:
    _check(self, address)
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    _check(self, address)
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if not _is_loopback(host):
        raise OSError(f"name lookups outside loopback are blocked in tests: {host!r}")
    return _real_getaddrinfo(host, *args, **kwargs)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
socket.getaddrinfo = _guarded_getaddrinfo  # type: ignore[assignment]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many workers ``-n auto`` starts: none for a subset of the suite (files or ``-k``
    named), else one more than the cores; ``HPD_TEST_WORKERS`` says otherwise."""
    given = os.environ.get("HPD_TEST_WORKERS")
    if given:
        return int(given)
    tests = config.rootpath / "tests"
    named = {(config.invocation_params.dir / a).resolve() for a in config.args}
    whole = config.args_source == pytest.Config.ArgsSource.TESTPATHS or named <= {
        tests,
        config.rootpath,
    }
    if not whole or config.getoption("keyword") or config.getoption("markexpr"):
        return 0
    return (os.cpu_count() or 1) + 1


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _no_process_hook_left() -> Iterator[None]:
    """Errors the test that leaves a process-wide hook it did not find (autouse fixtures are
    set up first, so this looks after every other fixture's teardown)."""
    before = process_hooks()
    yield
    left = [type(h).__name__ for h in process_hooks() if all(h is not b for b in before)]
    if left:
        pytest.fail(
            f"the test left process-wide hooks behind: {left} (hpd_agent.hooks.install "
            "without uninstall, or a global OpenTelemetry SDK set in this process); "
            "uninstall them in a finally or a fixture's teardown"
        )


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store's location, empty: a SQLite file, then the private PostgreSQL server's
    database (tests/_pg.py)."""
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    return str(request.getfixturevalue("fresh_postgres"))


@pytest.fixture
def allow_model_requests() -> Iterator[None]:
    """Allow LiteLLMModel requests (to loopback servers only: the socket guard stays)."""
    old = set_allow_model_requests(True)
    try:
        yield
    finally:
        set_allow_model_requests(old)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: Any) -> None:
    # Mark every coroutine test for anyio before anyio's plugin collects it, so it gets
    # parametrised over the backends together with the test's own parameters.
    if name.startswith("test") and inspect.iscoroutinefunction(obj):
        pytest.mark.anyio(obj)
