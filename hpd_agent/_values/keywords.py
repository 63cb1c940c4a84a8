"""``takes_keyword``: whether a callable accepts a keyword argument, read once from its code,
so a seam can grow a keyword (an answer's ``author``) without breaking the implementations
written before it (they are called without it)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["takes_keyword"]


def takes_keyword(function: Callable[..., Any], name: str) -> bool:
    """Whether ``function`` (a function or bound method) takes ``name`` as a keyword: a
    parameter of that name, or ``**kwargs``. Other callables (a C function, an object with
    ``__call__``) are asked through ``inspect.signature``; one that cannot be read: False."""
    code = getattr(function, "__code__", None)
    if code is not None:
        named = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        return name in named or bool(code.co_flags & inspect.CO_VARKEYWORDS)
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
