"""``module:attribute`` references to agents: finding an agent's, and loading one.

A durable run records which agent it belongs to (``RunRecord.agent_ref``) so that
``hpd-agent resume`` loads the same agent in another process, and refuses a different one.
The reference is known when the root Agent is a global of the module that built it; an agent
built inside a factory function has none until the CLI is told (``--agent module:factory``).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

__all__ = ["caller_module", "load_ref", "module_ref"]


def caller_module() -> str | None:
    """The importable name of the first module outside hpd_agent on the call stack.

    ``__main__`` counts only when it was started with ``python -m NAME`` (then it is
    ``NAME``): a script run by path cannot be imported back by name.
    """
    frame = sys._getframe(1)  # pyright: ignore[reportPrivateUsage]
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not (name == "hpd_agent" or name.startswith("hpd_agent.")):
            break
        frame = frame.f_back
    if frame is None:
        return None
    name = str(frame.f_globals.get("__name__", ""))
    if name == "__main__":
        spec = frame.f_globals.get("__spec__")
        return None if spec is None else str(spec.name)
    return name or None


def module_ref(obj: object, module: str | None) -> str | None:
    """``"module:attribute"`` if ``obj`` is a global of ``module``, else None."""
    if module is None:
        return None
    found = sys.modules.get(module)
    if found is None and module != "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None and spec.name == module:
            found = main  # the module runs as __main__ (python -m): its globals live there
    if found is None:
        return None
    for attribute, value in list(vars(found).items()):
        if value is obj and not attribute.startswith("_"):
            return f"{module}:{attribute}"
    return None


def load_ref(ref: str) -> Any:
    """The object at ``"module:attribute"``, importing the module as ``python -m`` would:
    the current directory is searched first.

    Raises:
        ValueError: ``ref`` is not of that form.
        ImportError, AttributeError: The module or attribute cannot be found.
    """
    module_name, _, attribute = ref.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"expected module:attribute, got {ref!r}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target
