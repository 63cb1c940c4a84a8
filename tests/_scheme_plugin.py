"""An installed package declaring a store scheme, for the tests: ``lite://PATH`` opens a
SQLite file through ``lite_plugin.open_lite``, declared as an entry point of the group
``hpd_agent.stores`` in a ``.dist-info`` folder on ``PYTHONPATH`` (as ``pip install``
leaves one), so a process finds the scheme without importing anything first."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PLUGIN = """
from hpd_agent.store import SQLiteStore, StoreOptions


def open_lite(location: str, options: StoreOptions) -> SQLiteStore:
    ttl = {} if options.lease_ttl is None else {"lease_ttl": options.lease_ttl}
    return SQLiteStore(location[len("lite://"):], create=options.create, **ttl)
"""


def installed_plugin(folder: Path) -> str:
    """Install the ``lite`` scheme's package in ``folder``; the ``PYTHONPATH`` (folder, the
    checkout, the tests) on which a process finds it."""
    (folder / "lite_plugin.py").write_text(_PLUGIN)
    info = folder / "lite_plugin-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lite-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[hpd_agent.stores]\nlite = lite_plugin:open_lite\n")
    return os.pathsep.join([str(folder), str(ROOT), str(ROOT / "tests")])
