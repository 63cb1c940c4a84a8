"""References to agents: finding an agent's, and loading one.

A durable run records which agent it belongs to (``RunRecord.agent_ref``) so that
``hpd-agent resume`` loads the same agent in another process, and refuses a different one.
A reference is ``module:attribute`` (an importable module) or ``path/to/script.py:attribute``
(a script run by path, ``python script.py``: its absolute path is recorded, not ``__main__``).
It is known when the root Agent is a global of the module or script that built it; an agent
built inside a factory function has none until the CLI is told (``--agent module:factory``).
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib
import importlib.util
import inspect
import operator
import os
import sys
from collections.abc import Callable
from itertools import repeat
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["SCRIPT_PREFIX", "MissingAttributeError", "caller_module", "load_ref", "module_ref"]

SCRIPT_PREFIX = "_hpd_agent_script_"
"""The start of the module name ``load_ref`` gives a script it loads by path."""

_LISTED = 12
"""A module without the attribute asked for, and no close one, lists its own up to this many."""


class MissingAttributeError(AttributeError):
    """``load_ref``: the module or script has no such attribute (the message names its file
    and the closest attribute it has)."""


def caller_module() -> str | None:
    """Where the first module outside hpd_agent on the call stack is found again.

    Its importable name; for ``__main__`` started with ``python -m NAME``, ``NAME``; for a
    script run by path (or loaded by path with ``load_ref``), the script's absolute path.
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
    if name == "__main__" or name.startswith(SCRIPT_PREFIX):
        spec = frame.f_globals.get("__spec__")
        if name == "__main__" and spec is not None and spec.name:
            return str(spec.name)
        return _script_path(frame.f_globals.get("__file__"))
    return name or None


def _script_path(file: object) -> str | None:
    if not isinstance(file, str) or not file.endswith(".py"):
        return None
    return os.path.abspath(file)


def _is_path(module: str) -> bool:
    return module.endswith(".py")


_SCRIPT_NAMES: dict[str, str] = {}
"""The ``sys.modules`` name a script's path was last found under: asked at every durable
run's start (a server's every run), a scan of ``sys.modules`` is hundreds of entries."""


def _script_module(path: str) -> Any:
    """The loaded module running the script at ``path`` (``__main__`` or one of ours)."""
    known = _SCRIPT_NAMES.get(path)
    if known is not None:
        found = sys.modules.get(known)
        if found is not None and _script_path(getattr(found, "__file__", None)) == path:
            return found
    for name, found in list(sys.modules.items()):
        if name != "__main__" and not name.startswith(SCRIPT_PREFIX):
            continue
        if _script_path(getattr(found, "__file__", None)) == path:
            _SCRIPT_NAMES[path] = name
            return found
    return None


def module_ref(obj: object, module: str | None) -> str | None:
    """``"module:attribute"`` (or ``"/path/script.py:attribute"``) if ``obj`` is a global of
    ``module``, else None."""
    if module is None:
        return None
    if _is_path(module):
        found = _script_module(module)
    else:
        found = sys.modules.get(module)
        if found is None and module != "__main__":
            main = sys.modules.get("__main__")
            spec = getattr(main, "__spec__", None)
            if spec is not None and spec.name == module:
                found = main  # the module runs as __main__ (python -m): its globals live there
    if found is None:
        return None
    names = vars(found)
    # Asked at every durable run's start: an identity test over the globals in C first (no
    # ``==``: a global's own ``__eq__`` is never called), the names only when it is one.
    if not any(map(operator.is_, list(names.values()), repeat(obj))):
        return None
    for attribute, value in list(names.items()):
        if value is obj and not attribute.startswith("_"):
            return f"{module}:{attribute}"
    return None


def _load_script(path_text: str) -> Any:
    """The script at ``path_text`` imported as a module (its ``__main__`` block not run)."""
    path = Path(path_text)
    path = (path if path.is_absolute() else Path.cwd() / path).resolve()
    loaded = _script_module(str(path))
    if loaded is not None:
        return loaded
    if not path.is_file():
        raise ImportError(f"no script {path}")
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]  # two scripts of one name
    name = SCRIPT_PREFIX + "".join(c if c.isalnum() else "_" for c in path.stem) + "_" + digest
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python script")
    module = importlib.util.module_from_spec(spec)
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))  # as `python script.py` would: siblings import
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_ref(ref: str, wanted: Callable[[object], bool] | None = None) -> Any:
    """The object at ``"module:attribute"`` or ``"path/to/script.py:attribute"``.

    A module is imported as ``python -m`` would (the current directory is searched first);
    a script is loaded from its path (relative to the current directory), without running
    its ``if __name__ == "__main__"`` block.

    Args:
        ref: The reference.
        wanted: What could be meant (say, an agent), for the suggestion when the attribute
            is missing; None: any object or function.

    Raises:
        ValueError: ``ref`` is not of that form.
        ImportError: The module or script cannot be found (or fails to import).
        MissingAttributeError: It has no such attribute: the message names the module and
            its file, and the closest attribute it has (``did you mean 'agent'?``).
    """
    module_name, _, attribute = ref.rpartition(":")
    if not module_name or not attribute:
        raise ValueError(f"expected module:attribute or script.py:attribute, got {ref!r}")
    if _is_path(module_name):
        target: Any = _load_script(module_name)
    else:
        cwd = os.getcwd()
        if cwd not in sys.path and "" not in sys.path:
            sys.path.insert(0, cwd)
        target = importlib.import_module(module_name)
    where, done = _module_where(module_name, target), list[str]()
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise MissingAttributeError(_no_attribute(where, target, part, wanted)) from None
        done.append(part)
        kind = type(target).__name__
        where = f"{module_name}:{'.'.join(done)} ({'an' if kind[0] in 'AEIOU' else 'a'} {kind})"
    return target


def _module_where(name: str, module: Any) -> str:
    """The module as a person finds it: a script by its path as given, a module by its name
    and its file (relative to the current directory when it is below it)."""
    if _is_path(name):
        return name
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return f"module {name}"
    path = Path(file)
    with contextlib.suppress(ValueError):
        path = path.relative_to(Path.cwd())
    return f"module {name} ({path})"


def _meant(target: Any, value: object, wanted: Callable[[object], bool] | None) -> bool:
    """Whether ``value``, an attribute of ``target``, could be what was meant: not a class,
    a module or a function a module imports; what ``wanted`` accepts."""
    if isinstance(value, (type, ModuleType)):
        return False
    if (
        isinstance(target, ModuleType)
        and inspect.isfunction(value)
        and value.__module__ != target.__name__
    ):
        return False  # imported (``from x import tool``), not defined there
    return wanted is None or wanted(value)


def _no_attribute(
    where: str, target: Any, name: str, wanted: Callable[[object], bool] | None
) -> str:
    """``where`` has no attribute ``name``: said with the closest it has that could be
    meant (``_meant``), in any case; else, when it is a module with a few, those."""
    found: dict[str, str] = {}
    for attribute in dir(target):
        value = inspect.getattr_static(target, attribute, None)  # no property runs
        if not attribute.startswith("_") and _meant(target, value, wanted):
            found.setdefault(attribute.casefold(), attribute)
    close = difflib.get_close_matches(name.casefold(), list(found), n=1, cutoff=0.6)
    if close:
        hint = f"; did you mean {found[close[0]]!r}?"
    elif isinstance(target, ModuleType) and 0 < len(found) <= _LISTED:
        hint = f"; it has {', '.join(sorted(found.values()))}"
    else:
        hint = ""
    return f"{where} has no attribute {name!r}{hint}"
