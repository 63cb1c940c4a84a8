"""JSON schemas of custom questions, checked and used without any I/O.

A custom question's schema comes from a tool (or from a store, for a question raised by
another process), so it is untrusted input. ``jsonschema`` would fetch a remote ``$ref``
(``https://...``, ``file:...``) while validating; here every validator gets a
``referencing.Registry`` whose ``retrieve`` refuses everything, and ``schema_problem``
refuses any ``$ref`` that is not a fragment of the schema itself (``#/...``) up front. The
schema's size and nesting depth are bounded, so a hostile schema cannot exhaust memory or
the recursion limit.

``format`` is checked, not just annotated: ``email`` and ``date`` as ``jsonschema`` checks
them, and ``date-time`` (RFC 3339) and ``uri`` (an absolute URI) here, without the optional
packages ``jsonschema`` would want for them. These are the formats an MCP elicitation's
string fields may carry.

Patterns (``pattern``, ``patternProperties``, the ``regex`` format) are matched by RE2 in
linear time, never by Python's backtracking ``re``; a schema with a pattern RE2 cannot
compile is refused, and one answer's matching is bounded (see ``patterns``).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from functools import cache, lru_cache
from typing import Any, NoReturn, cast
from urllib.parse import urlsplit

from ..text import bounded

__all__ = [
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "nesting_problem",
    "schema_mismatch",
    "schema_problem",
]

MAX_SCHEMA_BYTES = 65_536
"""Largest custom-question schema, in bytes of compact JSON."""

MAX_SCHEMA_DEPTH = 32
"""Deepest nesting of objects and arrays in a custom-question schema."""

_MAX_DATA_DEPTH = 200
"""Deepest nesting of a payload or an answer: far past any real one, well within recursion."""

_MISMATCH_CHARS = 400
"""Longest message saying why an answer does not match (it quotes part of the answer)."""

_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


def nesting_problem(
    value: Any, limit: int = _MAX_DATA_DEPTH, what: str = "the value"
) -> str | None:
    """Why ``value`` nests objects/arrays deeper than ``limit``, or None.

    Walks without recursion, so even a 100,000-deep value is measured safely.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = cast(dict[Any, Any], item).values()
        elif isinstance(item, (list, tuple)):
            children = cast(list[Any], item)
        else:
            continue
        if depth > limit:
            return f"{what} is nested more than {limit} levels deep"
        stack.extend((child, depth + 1) for child in cast(list[Any], children))
    return None


def _refs(schema: Any) -> list[str]:
    found: list[str] = []
    stack: list[Any] = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            mapping = cast(dict[str, Any], item)
            for key in _REF_KEYS:
                ref = mapping.get(key)
                if ref is not None:
                    found.append(ref if isinstance(ref, str) else repr(ref))
            stack.extend(mapping.values())
        elif isinstance(item, list):
            stack.extend(cast(list[Any], item))
    return found


def _safety_problem(schema: Any, text: str) -> str | None:
    """Why ``schema`` (its compact JSON: ``text``) is unsafe to use (too big, a non-local
    ``$ref``), or None. Its depth is checked first, by the caller."""
    size = len(text.encode())
    if size > MAX_SCHEMA_BYTES:
        return f"the schema is {size:,} bytes, more than the {MAX_SCHEMA_BYTES:,} allowed"
    for ref in _refs(schema):
        if not ref.startswith("#"):
            return (
                f"$ref {ref!r} points outside the schema; only local references "
                "(#/...) are allowed, nothing is fetched"
            )
    return None


def _refuse(uri: str) -> NoReturn:
    from referencing.exceptions import NoSuchResource

    raise NoSuchResource(ref=uri)


_DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*", re.ASCII)


def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True  # format applies to strings only
    if _DATE_TIME.fullmatch(value) is None:
        return False
    try:
        datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:  # e.g. month 13
        return False
    return True


def _is_uri(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not value.isascii() or any(c.isspace() for c in value):
        return False
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return _SCHEME.fullmatch(parts.scheme) is not None and bool(parts.netloc or parts.path)


@cache
def _format_checker() -> Any:
    from jsonschema import FormatChecker

    from .patterns import is_regex  # lazily, like jsonschema: it imports RE2

    checker = FormatChecker()
    checker.checks("date-time")(_is_date_time)  # pyright: ignore[reportUnknownMemberType]
    checker.checks("uri")(_is_uri)  # pyright: ignore[reportUnknownMemberType]
    checker.checks("regex")(is_regex)  # pyright: ignore[reportUnknownMemberType]
    return checker


@cache
def _meta_checker(cls: Any) -> Any:
    """``cls``'s own format checker for checking a schema, but with ``regex`` (a pattern's
    format in the meta-schema) meaning what RE2 compiles, not what Python's ``re`` does:
    ``\\p{L}`` is fine, a lookahead is not."""
    from jsonschema import FormatChecker

    from .patterns import is_pattern

    checker = FormatChecker(formats=())
    checker.checkers = {**cls.FORMAT_CHECKER.checkers}
    checker.checks("regex")(is_pattern)  # pyright: ignore[reportUnknownMemberType]
    return checker


@lru_cache(maxsize=128)
def _compiled(text: str) -> tuple[str | None, Any]:
    """(why the schema cannot check answers or None, its validator) for a schema's compact
    JSON: checking a schema and building its validator cost about 0.4 ms each, and the same
    schemas come back (every call of one tool asks alike)."""
    from jsonschema import exceptions  # lazily: only schema-checked questions need it

    from .patterns import schema_pattern_problem

    schema = json.loads(text)
    validator = _validator(schema)
    # Built even for a schema refused below: whoever checks with it anyway fetches nothing,
    # and its patterns run on RE2 or not at all.
    problem = _safety_problem(schema, text) or schema_pattern_problem(schema)
    if problem is not None:
        return problem, validator
    cls: Any = validator.__class__
    try:
        cls.check_schema(schema, format_checker=_meta_checker(cls))
    except exceptions.SchemaError as e:
        return str(e.message), validator
    return None, validator


def _validator(schema: Any) -> Any:
    from jsonschema import validators

    from .patterns import linear

    cls = cast(Any, validators.validator_for(schema))  # pyright: ignore[reportUnknownMemberType]
    return linear(cls)(schema, registry=_no_fetching(), format_checker=_format_checker())


def _no_fetching() -> Any:
    from referencing import Registry

    return Registry(retrieve=_refuse)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]


def _checked(schema: Any) -> tuple[str | None, Any]:
    deep = nesting_problem(schema, MAX_SCHEMA_DEPTH, "the schema")
    if deep is not None:  # before any recursive walk (json.dumps) of it
        return deep, None
    return _compiled(json.dumps(schema, separators=(",", ":"), sort_keys=True))


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot check answers (unsafe, or not a valid JSON schema), or None."""
    return _checked(schema)[0]


def schema_mismatch(schema: Any, value: Any) -> str | None:
    """Why ``value`` does not match the (valid, safe) ``schema``, or None when it does."""
    from jsonschema import exceptions
    from referencing.exceptions import Unresolvable

    from .patterns import PatternRefused, pattern_budget

    validator = _checked(schema)[1]
    if validator is None:  # nested too deep to cache: checked as given
        validator = _validator(schema)
    try:
        with pattern_budget():
            errors = validator.iter_errors(value)
            error = cast(Any, exceptions.best_match(errors))  # pyright: ignore[reportUnknownMemberType]
    except PatternRefused as e:
        return str(e)
    except Unresolvable as e:
        return f"the schema's reference {e} cannot be resolved (nothing is fetched)"
    except RecursionError:
        return "the schema refers to itself without end"
    if error is None:
        return None
    path: list[Any] = list(error.absolute_path)
    where = "/".join(str(p) for p in path) or "the answer"
    # jsonschema's message quotes the answer whole: an answer can be megabytes.
    return bounded(f"{where} does not match the schema: {error.message}", _MISMATCH_CHARS)
