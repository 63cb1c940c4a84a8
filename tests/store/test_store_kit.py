"""The store author kit: what a store needs is public in ``hpd_agent.store``.

``MemoryStore`` and a store written from scratch (examples/dict_store.py, one module) are
built from public names only; the one from scratch passes ``store_contract`` (every test
below named ``test_store_*``) and opens through ``open_store`` once its scheme is
registered. Locations: every shipped scheme goes through the same registry.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import hpd_agent.store
from hpd_agent.exceptions import StoreUnavailableError, UserError
from hpd_agent.store import (
    MemoryStore,
    SQLiteStore,
    Store,
    StoreOptions,
    open_store,
    register_scheme,
)
from hpd_agent.testing.store_contract import *  # noqa: F403  (the contract, on DictStore)

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
from dict_store import DictStore, open_dict  # noqa: E402


@pytest.fixture
def contract_store_factory() -> StoreFactory:  # noqa: F405
    def make(*, lease_ttl: float) -> Store:
        return DictStore(lease_ttl=lease_ttl)

    return make


def _store_imports(path: Path) -> tuple[set[str], set[str]]:
    """The names ``path`` imports from ``hpd_agent.store`` (or its public ``kit``), and the
    other modules it imports (relative ones read as from inside ``hpd_agent.store``)."""
    names: set[str] = set()
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = ["hpd_agent", "store"][: max(0, 3 - node.level)] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if module in ("hpd_agent.store", "hpd_agent.store.kit"):
                names |= {alias.name for alias in node.names}
            else:
                modules.add(module)
        elif isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
    return names, modules


@pytest.mark.parametrize(
    "path",
    [ROOT / "hpd_agent" / "store" / "memory.py", ROOT / "examples" / "dict_store.py"],
    ids=["MemoryStore", "DictStore"],
)
def test_a_store_is_built_from_public_names_only(path: Path) -> None:
    names, modules = _store_imports(path)
    public = set(hpd_agent.store.__all__)
    assert names and names <= public, names - public
    private = {m for m in modules if any(p.startswith("_") for p in m.split("."))}
    assert private <= {"__future__"}, private
    assert not {m for m in modules if m.startswith("hpd_agent.store")}, modules


def test_open_store_opens_each_shipped_scheme_and_plain_paths(tmp_path: Path) -> None:
    import anyio

    path = tmp_path / "runs.db"
    for location in (str(path), f"sqlite://{path}", f"SQLite:{path}", path):
        store = open_store(location, lease_ttl=3.0)
        assert isinstance(store, SQLiteStore) and store.path == str(path)
        assert store.lease_ttl == 3.0
        anyio.run(store.aclose)
    os_durable = open_store(f"sqlite:{path}", durability="os")
    assert isinstance(os_durable, SQLiteStore) and os_durable.durability == "os"
    anyio.run(os_durable.aclose)
    memory = open_store("memory:", lease_ttl=2.0)
    assert isinstance(memory, MemoryStore) and memory.lease_ttl == 2.0
    with pytest.raises(UserError, match="durability is a SQLite store option"):
        open_store("memory:", durability="os")
    with pytest.raises(UserError, match="new and empty"):
        open_store("memory:", create=False)
    with pytest.raises(StoreUnavailableError, match="does not exist"):
        open_store(tmp_path / "typo.db", create=False)
    assert not (tmp_path / "typo.db").exists()
    with pytest.raises(StoreUnavailableError, match=r"nope://.*register_scheme"):
        open_store("nope://somewhere")


def test_a_registered_scheme_opens_its_store_and_refuses_a_second_factory() -> None:
    store = open_store("dict:", lease_ttl=4.0)  # registered by examples/dict_store.py
    assert isinstance(store, DictStore) and store.lease_ttl == 4.0
    assert register_scheme("dict", open_dict) is open_dict  # the same factory: fine
    with pytest.raises(UserError, match="registered already"):
        register_scheme("DICT", lambda location, options: DictStore())
    for bad in ("", "x", "1ab", "a b", "ab:"):
        with pytest.raises(UserError, match="not a URL scheme"):
            register_scheme(bad, open_dict)
    seen: list[tuple[str, StoreOptions]] = []

    def remember(location: str, options: StoreOptions) -> Store:
        seen.append((location, options))
        return MemoryStore()

    register_scheme("kit-test+v1", remember)
    open_store("Kit-Test+V1://host/x?y=1", create=False)
    assert seen == [("Kit-Test+V1://host/x?y=1", StoreOptions(create=False))]
