"""Store locations: which store a text such as ``postgresql://host/db`` or ``runs.db`` opens.

A location starting with ``scheme:`` opens the store registered for that scheme
(``register_scheme``, or an installed package's entry point of the group ``hpd_agent.stores``
named after the scheme, whose value is ``module:factory``: so the ``hpd-agent`` commands
open a third-party store's locations without importing anything first); anything else is a
SQLite file path. The shipped stores are
registered here through the same call: ``postgresql`` and ``postgres`` (``PostgresStore``,
the ``postgres`` extra), ``sqlite`` (``sqlite:///abs/path.db``, ``sqlite://rel/path.db``)
and ``memory`` (``memory:``, a ``MemoryStore``). ``open_store``, the ``hpd-agent``
commands and the servers open every location through this registry.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypedDict

from ..exceptions import StoreUnavailableError, UserError
from ._protocol import Store

__all__ = [
    "ENTRY_POINTS",
    "Scheme",
    "StoreFactory",
    "StoreOptions",
    "lease_option",
    "no_durability",
    "open_location",
    "register_scheme",
    "scheme_of",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreOptions:
    """What ``open_store`` passes a scheme's factory besides the location.

    Attributes:
        lease_ttl: Seconds a run's lease lasts unless renewed; None: the store's default.
        durability: A SQLite file's ``durability`` (``"process"`` or ``"os"``); None: its
            default. A store that has no such setting refuses it (``UserError``).
        create: False: open an existing store only, refusing one that is missing (the
            ``pending``, ``answer`` and ``resume`` commands: a mistyped location must not
            make a new, empty store).
    """

    lease_ttl: float | None = None
    durability: Literal["process", "os"] | None = None
    create: bool = True


StoreFactory = Callable[[str, StoreOptions], Store]
"""A scheme's factory: the store at a location (the whole text, scheme included)."""


@dataclass(frozen=True, slots=True)
class Scheme:
    """A registered scheme.

    Attributes:
        name: The scheme, lower case, without its colon.
        factory: The factory, or ``"module:attribute"`` naming it (imported at first use).
        extra: The hpd-agent extra its imports need, if any (the CLI names it when an
            import fails).
    """

    name: str
    factory: StoreFactory | str
    extra: str | None = None

    def load(self) -> StoreFactory:
        """The factory, imported if named.

        Raises:
            ImportError: Its module (or what that imports) is not installed.
        """
        if not isinstance(self.factory, str):
            return self.factory
        module, _, attribute = self.factory.partition(":")
        factory: StoreFactory = getattr(importlib.import_module(module), attribute)
        return factory


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+):")
"""A location's scheme (RFC 3986; two characters at least, so a drive letter is none)."""

ENTRY_POINTS = "hpd_agent.stores"
"""The entry point group naming installed packages' schemes (``name = module:factory``)."""

_SCHEMES: dict[str, Scheme] = {}
_LOCK = threading.Lock()


def register_scheme(
    scheme: str, factory: StoreFactory | str, *, extra: str | None = None
) -> StoreFactory | str:
    """Open locations starting with ``scheme:`` with ``factory``.

    Args:
        scheme: The scheme without its colon (``"redis"`` for ``redis://...``); letters,
            digits, ``+``, ``-`` and ``.``, starting with a letter, two characters at least.
        factory: Called as ``factory(location, options)`` (the whole location text and a
            ``StoreOptions``) to make the store; or ``"module:attribute"`` naming it, so
            the module (and the driver it needs) is imported only when such a location is
            opened.
        extra: The hpd-agent extra the factory's imports need, if it is one of ours.

    Returns:
        ``factory`` (usable as a decorator's result).

    Raises:
        UserError: Not a scheme, or one registered already with another factory.
    """
    name = scheme.lower()
    if not _SCHEME.fullmatch(name + ":"):
        raise UserError(f"not a URL scheme: {scheme!r} (letters, digits, '+', '-', '.')")
    with _LOCK:
        known = _SCHEMES.get(name)
        if known is not None and known.factory != factory:
            raise UserError(f"the store scheme {name!r} is registered already, to another factory")
        _SCHEMES[name] = Scheme(name, factory, extra)
    return factory


def scheme_of(location: str) -> Scheme | None:
    """The registered scheme ``location`` names; None for a file path.

    Raises:
        StoreUnavailableError: It names a scheme (``name://``) that nobody registered.
    """
    match = _SCHEME.match(location)
    if match is None:
        return None
    name = match.group(1).lower()
    found = _SCHEMES.get(name) or _installed(name)
    if found is None and location[match.end() :].startswith("//"):
        raise StoreUnavailableError(
            f"cannot open {name}://...: no store is registered for {name}:// locations (register one with "
            "hpd_agent.store.register_scheme, or give a SQLite file path)"
        )
    return found


def _installed(name: str) -> Scheme | None:
    """The scheme an installed package declares (entry point group ``hpd_agent.stores``)."""
    for point in importlib.metadata.entry_points(group=ENTRY_POINTS, name=name):
        register_scheme(name, point.value)
        return _SCHEMES[name]
    return None


def open_location(location: str, options: StoreOptions, *, path: bool = False) -> Store:
    """The store at ``location`` (``path``: a file path, whatever it looks like)."""
    found = None if path else scheme_of(location)
    if found is None:
        found = _SCHEMES["sqlite"]  # a file path
    return found.load()(location, options)


class LeaseOption(TypedDict, total=False):
    """A store's ``lease_ttl`` keyword argument, if set (``lease_option``)."""

    lease_ttl: float


def lease_option(options: StoreOptions) -> LeaseOption:
    """``options.lease_ttl`` as a store's keyword argument (none if not set)."""
    return {} if options.lease_ttl is None else {"lease_ttl": options.lease_ttl}


def no_durability(options: StoreOptions, what: str) -> None:
    """Refuse ``options.durability`` for a store that has no such setting (``what`` says
    why, after "durability is a SQLite store option; ")."""
    if options.durability is not None:
        raise UserError(f"durability is a SQLite store option; {what}")


# The shipped stores, by name: their modules are imported when a location of theirs opens.
register_scheme("sqlite", "hpd_agent.store.sqlite:open_file")
register_scheme("memory", "hpd_agent.store.memory:open_memory")
for _name in ("postgresql", "postgres"):
    register_scheme(_name, "hpd_agent.store.postgres:open_dsn", extra="postgres")
