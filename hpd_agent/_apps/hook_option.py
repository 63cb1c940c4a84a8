"""``--hook MODULE:ATTR`` of ``serve`` (and ``serve --a2a``): hooks installed for every run
the server starts (a ``hpd_agent.governance.Webhook``, a notifier of your own).

``MODULE:ATTR`` names a ``Hook`` (or something that, called with no arguments, returns one),
importable from the current directory like the served agent. A reference that does not
load, or names no hook, is one error line (``EXIT_USAGE``) before anything starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

from ..hooks import Hook, install
from ..text import error_text
from .cli_store import EXIT_USAGE, _Fail

__all__ = ["add_hook_option", "install_hooks", "load_hook"]


def add_hook_option(parser: Any) -> None:
    """Add the repeatable ``--hook MODULE:ATTR`` option to a server command's parser."""
    parser.add_argument(
        "--hook",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="a Hook (or a callable returning one) for every run, e.g. a "
        "hpd_agent.governance.Webhook (repeatable)",
    )


def load_hook(spec: str) -> Hook:
    """The hook ``spec`` names (see the module); ``_Fail`` saying why it cannot be one."""
    from .._values.refs import load_ref

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # importable from the current directory, as the agent
    try:
        target = load_ref(spec)
        hook = target if isinstance(target, Hook) else target() if callable(target) else target
    except ValueError:
        raise _Fail(EXIT_USAGE, f"--hook {spec!r} is not of the form MODULE:ATTR") from None
    except Exception as e:  # the user's module: any error while importing or building it
        raise _Fail(EXIT_USAGE, f"cannot load --hook {spec!r}: {error_text(e)}") from None
    if not isinstance(hook, Hook):
        raise _Fail(EXIT_USAGE, f"--hook {spec!r} gave {type(hook).__name__}, not a Hook")
    return hook


def install_hooks(specs: Sequence[str]) -> list[Hook]:
    """Load every ``--hook`` (all or none: the first that fails stops), then install them
    process-wide (``hpd_agent.hooks.install``)."""
    hooks = [load_hook(spec) for spec in specs]
    for hook in hooks:
        install(hook)
    return hooks
