"""The runs a store object drives, and CPython's cyclic GC while they are many.

With many runs in flight at once (each holding its frames, cancel scopes and journal
objects across its awaits), CPython's cyclic collector runs its young collections every
700 allocations and its full ones every 100 young ones, walking every object the runs in
flight hold each time: at 10,000 durable runs in flight that was two thirds of the time
(docs/performance.md, "Fifth pass"). So while a store object drives ``CROWD`` runs or more,
``Driving`` raises the collector's first threshold (``gc.set_threshold``) to ``GEN0``, once
per process however many stores are crowded, and sets back the host's own thresholds once
no store drives more than ``CALM`` runs. Nothing else changes: the collector stays enabled,
its other two thresholds stay the host's, and cycles are still freed, only in fewer and
larger collections.

The host is not surprised:

- the thresholds the host had are set back exactly, and only if they are still the ones set
  here: a host that set its own meanwhile keeps them;
- a host whose first threshold is 0 or above ``GEN0`` already, or with the collector
  disabled, is left alone;
- ``SQLiteStore(..., gc_tuning=False)`` / ``PostgresStore(..., gc_tuning=False)``, or
  ``HPD_AGENT_GC_TUNING=0`` in the environment (read when a store is made), turn it
  off: the collector's thresholds are then never touched (and a ``SQLiteStore`` file with
  the default durability commits each write at once instead of grouping them, as the
  grouping pays only with the collector tuned).
"""

from __future__ import annotations

import gc
import os
import threading

__all__ = ["CALM", "CROWD", "GEN0", "Driving", "tuning_allowed"]

CROWD = 64
"""Runs one store object drives at once from which the collector is tuned."""
CALM = 16
"""Runs at or below which a store object no longer needs it (below ``CROWD``: a store near
the line does not flip the thresholds at every run)."""
GEN0 = 50_000
"""The collector's first threshold while a store is crowded (CPython's default: 700)."""

_lock = threading.Lock()
_crowded = 0
"""Store objects crowded now, in the whole process."""
_saved: tuple[int, int, int] | None = None
"""The host's thresholds, while they are raised here."""


def tuning_allowed() -> bool:
    """Whether the environment allows the tuning (``HPD_AGENT_GC_TUNING`` not ``0``,
    ``false``, ``no`` or ``off``)."""
    flag = os.environ.get("HPD_AGENT_GC_TUNING", "").strip().lower()
    return flag not in ("0", "false", "no", "off")


def _raise() -> None:
    global _crowded, _saved
    with _lock:
        _crowded += 1
        if _crowded > 1:
            return
        host = gc.get_threshold()
        if gc.isenabled() and 0 < host[0] < GEN0:
            _saved = host
            gc.set_threshold(GEN0, host[1], host[2])


def _restore() -> None:
    global _crowded, _saved
    with _lock:
        _crowded -= 1
        if _crowded > 0 or _saved is None:
            return
        saved, _saved = _saved, None
        if gc.get_threshold() == (GEN0, saved[1], saved[2]):  # else the host set its own
            gc.set_threshold(*saved)


class Driving:
    """The runs a store object drives now (from the take of their lease to its release),
    with the collector tuned while they are many (module doc).

    Args:
        tune: False: never touch the collector (the store's ``gc_tuning``).
    """

    __slots__ = ("runs", "tune", "tuned")

    def __init__(self, *, tune: bool = True) -> None:
        self.runs: set[str] = set()
        self.tune = tune
        self.tuned = False
        """Whether this store object counts as crowded now (``_raise`` called for it)."""

    def add(self, run_id: str) -> None:
        """``run_id`` is driven from now on."""
        runs = self.runs
        runs.add(run_id)
        if len(runs) >= CROWD and self.tune and not self.tuned:
            self.tuned = True
            _raise()

    def discard(self, run_id: str) -> None:
        """``run_id`` is no longer driven (released, ended or refused)."""
        runs = self.runs
        runs.discard(run_id)
        if self.tuned and len(runs) <= CALM:
            self.tuned = False
            _restore()

    def close(self) -> None:
        """The store is closed: the collector set back if this store had it tuned."""
        self.runs.clear()
        if self.tuned:
            self.tuned = False
            _restore()
