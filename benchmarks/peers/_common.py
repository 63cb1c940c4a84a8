"""What every bench process shares: quiet environment, network guard, clocks, RSS, result line.

Import it before any framework (``bench_<framework>.py`` and ``../bench_hpd_agent.py`` do):

- dummy API keys and every tracing/telemetry exporter off, set before the frameworks read
  their settings (openai-agents would otherwise export traces to its vendor);
- a network guard: any outbound connection or DNS lookup to a host other than the loopback
  fails with ``OSError`` and is recorded; ``emit`` reports the records as ``net_attempts``,
  so a figure that touched the network shows it (the benchmarks' PostgreSQL server listens
  on 127.0.0.1, which stays allowed);
- ``now`` (``perf_counter``), ``rss_now_mb``/``peak_rss_mb`` and ``summarize``;
- the calibration kernel: a fixed pure-Python workload timed before and after each
  workload. The 2-core VM alternates between a fast mode and one about 1.7x slower;
  ``benchmarks/run.py`` divides each figure by its process's kernel time and multiplies by
  ``jobs.CALIB_REF_MS`` (the kernel's fast-mode time), so processes from either mode compare;
- ``emit``: prints the one ``RESULT_JSON {...}`` line the runner parses.
"""

from __future__ import annotations

import ipaddress
import json
import os
import resource
import socket
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

_QUIET = {
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "OPENAI_AGENTS_DONT_LOG_MODEL_DATA": "1",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_API_KEY": "",
    "LANGCHAIN_API_KEY": "",
    "LOGFIRE_SEND_TO_LOGFIRE": "false",
    "OTEL_SDK_DISABLED": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HPD_AGENT_ALLOW_MODEL_REQUESTS": "0",
}
os.environ.update(_QUIET)
os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark-no-key")
os.environ.setdefault("PYTHONWARNINGS", "ignore")

import warnings  # noqa: E402

warnings.simplefilter("ignore")

now = time.perf_counter

# ----------------------------------------------------------------------------- network guard
NET_ATTEMPTS: list[str] = []
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def _is_loopback(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return False
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _refuse(what: str, target: object) -> None:
    NET_ATTEMPTS.append(f"{what} {target!r}")
    raise OSError(f"the benchmark allows no network access ({what} {target!r})")


def _allowed(sock: socket.socket, address: Any) -> bool:
    if sock.family == getattr(socket, "AF_UNIX", None):
        return True
    host = address[0] if isinstance(address, tuple) and address else address
    return _is_loopback(host)


_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex
_getaddrinfo = socket.getaddrinfo
_create_connection = socket.create_connection


def _guarded_connect(self: socket.socket, address: Any) -> None:
    if not _allowed(self, address):
        _refuse("connect", address)
    return _connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    if not _allowed(self, address):
        _refuse("connect_ex", address)
    return _connect_ex(self, address)


def _guarded_getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host is not None and not _is_loopback(host):
        _refuse("getaddrinfo", host)
    return _getaddrinfo(host, *args, **kwargs)


def _guarded_create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
    if not _is_loopback(address[0]):
        _refuse("create_connection", address)
    return _create_connection(address, *args, **kwargs)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
socket.getaddrinfo = _guarded_getaddrinfo  # type: ignore[assignment]
socket.create_connection = _guarded_create_connection  # type: ignore[assignment]


# ----------------------------------------------------------------------------- measuring
def rss_now_mb() -> float:
    """The process's resident set size now, in MiB (``VmRSS``)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    """The process's peak resident set size so far, in MiB (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """Median, min, max, mean and count of a workload's repeats."""
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "mean": statistics.fmean(samples),
        "n": len(samples),
    }


def pkg_versions(*names: str) -> dict[str, str | None]:
    """Installed version of each distribution (None when absent)."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


# ----------------------------------------------------------------------------- calibration
class _Item:
    __slots__ = ("key", "value")

    def __init__(self, value: int, key: str) -> None:
        self.value = value
        self.key = key


def _value(item: _Item) -> int:
    return item.value


def _kernel() -> int:
    # Attribute access, allocation, dict stores, isinstance and calls: the mix agent
    # frameworks spend their time on, so its speed tracks theirs.
    table: dict[str, _Item] = {}
    total = 0
    for i in range(4000):
        item = _Item(i, "k%d" % i)  # noqa: UP031 (the reference time was taken with %)
        table[item.key] = item
        if isinstance(item, _Item):
            total += _value(item)
    return total + len(table)


def calibrate(reps: int = 15) -> float:
    """Median time in ms of the calibration kernel over ``reps`` runs."""
    times: list[float] = []
    for _ in range(reps):
        t0 = now()
        _kernel()
        times.append(now() - t0)
    return statistics.median(times) * 1e3


_CALIB: dict[str, float] = {}


def calib_start() -> None:
    """Time the kernel once before the workload (call after the framework's imports)."""
    _CALIB["before"] = calibrate()


def emit(
    framework: str,
    workload: str,
    metrics: dict[str, Any],
    versions: dict[str, Any],
    extra: dict[str, Any] | None = None,
) -> None:
    """Print the process's ``RESULT_JSON`` line (the kernel is timed again first)."""
    result: dict[str, Any] = {
        "calib_before_ms": _CALIB.get("before"),
        "calib_after_ms": calibrate(),
        "framework": framework,
        "workload": workload,
        "metrics": metrics,
        "versions": versions,
        "python": sys.version.split()[0],
        "net_attempts": list(NET_ATTEMPTS),
        "peak_rss_mb_process": peak_rss_mb(),
    }
    result.update(extra or {})
    print("RESULT_JSON " + json.dumps(result), flush=True)


# ----------------------------------------------------------------------------- command line
WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "STUB")


def argument_parser(description: str, workloads: Iterable[str] = WORKLOADS) -> Any:
    """The command line every bench shares (a bench adds its own options)."""
    import argparse

    p = argparse.ArgumentParser(description=description)
    p.add_argument("workload", choices=list(workloads))
    p.add_argument("--turns", type=int, default=200, help="W1: model turns per run")
    p.add_argument("--fanout", type=int, default=200, help="W2: parallel calls")
    p.add_argument("--repeats", type=int, default=200, help="W3/W4: timed runs")
    p.add_argument("--runs", type=int, default=5, help="W1/W2: timed runs")
    p.add_argument("--concurrency", type=int, default=1000, help="W5: concurrent runs")
    p.add_argument("--w5-turns", type=int, default=5, help="W5: turns per run")
    p.add_argument("--depth", type=int, choices=(1, 2), default=2, help="W4: asker depth")
    p.add_argument("--dsn", default=None, help="PostgreSQL server for --store/--checkpointer")
    return p
