"""The optional extras the CLI's commands need: one that is not installed is one line on
stderr, exit status 2 (as a usage error), giving the command that installs it once.

A command imports what an extra brings inside ``needs_extra`` before it starts anything (a
server process, a socket): any ``ImportError`` there means the extra is missing or broken,
and installing it again is the remedy. The line names the missing module when the error
says which; the hint an integration's own ``ImportError`` carries is not repeated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator

__all__ = [
    "MissingExtraError",
    "install_hint",
    "needs_extra",
    "needs_store_extra",
]


class MissingExtraError(Exception):
    """A command needs an extra that is not installed; the message is the CLI's line.

    Attributes:
        status: The exit status (2, as a usage error: the remedy is the user's).
    """

    status = 2


def install_hint(extra: str) -> str:
    """The command that installs ``extra`` (from the checkout: hpd-agent is not on PyPI yet)."""
    return f'pip install -e ".[{extra}]" in the hpd-agent checkout (it is not on PyPI yet)'


def _missing_module(error: BaseException) -> str | None:
    """The name of the module whose absence caused ``error``, if its chain says."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ModuleNotFoundError) and current.name:
            return current.name
        current = current.__cause__ or current.__context__
    return None


@contextlib.contextmanager
def needs_extra(extra: str, what: str) -> Generator[None]:
    """Imports of ``extra`` for ``what`` (a command): an ``ImportError`` becomes a
    ``MissingExtraError`` whose line says what needs which extra, and how to install it.

    Args:
        extra: The extra's name in pyproject (``web``, ``a2a``, ``postgres``, ...).
        what: The command or option that needs it, as the line starts (``serve --a2a``).
    """
    try:
        yield
    except ImportError as e:
        module = _missing_module(e)
        missing = f" (no module {module!r})" if module else ""
        message = f"{what} needs the {extra} extra{missing}: {install_hint(extra)}"
        raise MissingExtraError(message) from None


def needs_store_extra(location: str | None) -> None:
    """Check that the store at ``location`` can be opened by this install: a location whose
    scheme needs an extra (``postgresql://``: ``postgres``; ``register_scheme``) imports its
    store's module here (``MissingExtraError`` if the extra is missing).

    Raises:
        StoreUnavailableError: ``location`` names a scheme nobody registered.
    """
    from ..store._schemes import scheme_of

    found = None if location is None else scheme_of(location)
    if found is not None and found.extra is not None:
        with needs_extra(found.extra, f"a {found.name}:// store"):
            found.load()
