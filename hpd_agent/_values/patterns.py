"""The regular expressions of a JSON schema, matched in bounded time.

A schema's ``pattern`` and ``patternProperties`` come from whoever wrote the schema: a tool,
an A2A remote, an MCP server. ``jsonschema`` matches them with Python's ``re``, which
backtracks: ``^(\\w+\\s?)*$`` against a 50-character sentence runs for hours, holding the
event loop. Here they are matched by RE2 (``google-re2``), whose time is linear in the text:

- ``linear(cls)`` is a ``jsonschema`` validator class whose ``pattern``,
  ``patternProperties`` and ``additionalProperties`` (which matches the
  ``patternProperties`` to find the extra keys) use RE2, with ``re.search``'s meaning: the
  pattern may match anywhere unless anchored.
- ``schema_pattern_problem`` refuses, before any answer is checked, a schema with a pattern
  RE2 cannot compile (lookaround, backreferences, atomic groups, a program over the memory
  bound); falling back to ``re`` for those would bring the hang back. It also refuses
  ``unevaluatedProperties`` beside ``patternProperties``, whose ``jsonschema`` code matches
  with ``re`` where no keyword of ours can reach.
- ``pattern_budget`` bounds one answer's matching: RE2's worst case costs about the text's
  length times the pattern's compiled size, and the sum of those over the answer's checks
  may be at most ``MAX_PATTERN_STEPS``; past it the answer is refused as too large to check.
- ``is_regex`` (an answer's) and ``is_pattern`` (a schema's own, for its meta-schema) are
  the ``regex`` format: what RE2 compiles.

Patterns are ECMA-262 in JSON Schema. RE2 differs where it matters little: ``\\d``, ``\\w``,
``\\b`` and ``\\s`` are ASCII (``\\d`` and ``\\w`` as in ECMA-262; ``\\s`` leaves out
Unicode spaces: write ``[\\s\\p{Z}]``), ``\\p{L}``-style classes work, ``$`` matches only at
the very end (Python's also before a final newline). ECMA-262's ``\\uXXXX`` and ``\\u{X}``
escapes, which RE2 lacks, are translated to RE2's ``\\x{X}``, a surrogate pair to its one
character.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache, lru_cache
from typing import Any, cast

import re2 as _re2  # pyright: ignore[reportMissingTypeStubs]
from jsonschema import ValidationError, validators

from ..text import bounded, mend, shown

_engine: Any = _re2  # google-re2 ships no types

__all__ = [
    "MAX_PATTERN_STEPS",
    "PatternRefused",
    "is_pattern",
    "is_regex",
    "linear",
    "pattern_budget",
    "schema_pattern_problem",
]

MAX_PATTERN_STEPS = 1 << 25
"""Most work one answer's pattern checks may take: the sum, over every string or key a
pattern is matched against, of its length times the pattern's compiled size (RE2's worst
case per character). Well under a second at worst; ordinary patterns on ordinary answers use a
tiny part of it (a 31-instruction e-mail pattern may check a million characters)."""

_MAX_MEM = 4 << 20
"""RE2's memory for one pattern (two thirds for its program, bounding its compiled size,
the rest for its DFA caches); a pattern needing more is refused."""

_SHOWN = 80
"""Characters of a pattern quoted in a message."""

# Keywords whose values are data, never schemas: a "pattern" inside them is not a pattern.
_DATA = frozenset({"const", "enum", "default", "examples"})
# Keywords mapping names to schemas: their keys are names, not keywords.
_BY_NAME = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
_HEX4 = re.compile(r"[0-9A-Fa-f]{4}")
_BRACED = re.compile(r"\{([0-9A-Fa-f]{1,6})\}")


class PatternRefused(Exception):
    """A pattern cannot be matched in bounded time (it does not compile, or the answer's
    checks would pass ``MAX_PATTERN_STEPS``). Raised out of validation, never yielded as
    an error: under ``not`` or ``anyOf`` an error could turn into a pass."""


def _shown(pattern: str) -> str:
    return shown(pattern, _SHOWN)


def _unicode_escape(pattern: str, at: int) -> tuple[int, int] | None:
    """(code point, end) of the ``\\uXXXX`` or ``\\u{X}`` escape at ``at``, or None."""
    four = _HEX4.match(pattern, at + 2)
    if four is not None:
        return int(four.group(), 16), four.end()
    braced = _BRACED.match(pattern, at + 2)
    if braced is not None:
        return int(braced.group(1), 16), braced.end()
    return None


def _to_re2(pattern: str) -> str:
    """``pattern`` with ECMA-262's ``\\u`` escapes spelled as RE2's ``\\x{...}``."""
    if "\\u" not in pattern:
        return pattern
    out: list[str] = []
    i = 0
    while i < len(pattern):
        escape = _unicode_escape(pattern, i) if pattern.startswith("\\u", i) else None
        if escape is None:  # an escape is copied whole, so "\\\\u0041" stays literal
            step = 2 if pattern[i] == "\\" else 1
            out.append(pattern[i : i + step])
            i += step
            continue
        code, i = escape
        low = _unicode_escape(pattern, i) if pattern.startswith("\\u", i) else None
        if 0xD800 <= code < 0xDC00 and low is not None and 0xDC00 <= low[0] < 0xE000:
            code, i = 0x10000 + ((code - 0xD800) << 10) + (low[0] - 0xDC00), low[1]
        out.append(f"\\x{{{code:X}}}")
    return "".join(out)


def _compile(pattern: str) -> tuple[Any, int]:
    """(RE2 program, its compiled size) of ``pattern``, or ``PatternRefused`` saying why."""
    options = _engine.Options()
    options.never_capture = True  # only "does it match" is asked: the fastest engines
    options.log_errors = False
    options.max_mem = _MAX_MEM
    try:
        # As UTF-8 bytes, matched against bytes: the same match, without the wrapper mapping
        # byte offsets back to characters on every search.
        regex = _engine.compile(_utf8(_to_re2(pattern)), options)
    except _engine.error as e:
        reason = e.args[0] if e.args else "invalid"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternRefused(
            f"the pattern {_shown(pattern)} cannot be used: patterns are matched by RE2, "
            "a linear-time engine without lookaround, backreferences or atomic groups, "
            f"within {_MAX_MEM >> 20} MiB ({bounded(str(reason), 200)})"
        ) from None
    return regex, cast(int, regex.programsize)


# Up to 32 patterns' programs and DFA caches (a few MiB at most each, a few KiB usually).
_compiled = lru_cache(maxsize=32)(_compile)

_spent: ContextVar[list[int] | None] = ContextVar("hpd_agent_pattern_steps", default=None)


@contextmanager
def pattern_budget() -> Generator[None]:
    """Count the pattern checks made inside against one ``MAX_PATTERN_STEPS``."""
    token = _spent.set([0])
    try:
        yield
    finally:
        _spent.reset(token)


def _charge(steps: int, doing: str) -> None:
    spent = _spent.get() or [0]  # outside a budget: each check on its own
    spent[0] += steps
    if spent[0] > MAX_PATTERN_STEPS:
        raise PatternRefused(
            f"the answer is too large to check in bounded time: {doing} would bring its "
            f"pattern checks past {MAX_PATTERN_STEPS:,} steps; shorten it"
        )


def _search(pattern: str, text: str) -> bool:
    regex, size = _compiled(pattern)
    _charge(
        len(text) * size,
        f"matching {_shown(pattern)} ({size:,} steps a character) on {len(text):,} characters",
    )
    return regex.search(_utf8(text)) is not None


def _utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate (JSON allows one) is matched as U+FFFD
        return mend(text).encode()


def is_regex(value: object) -> bool:
    """The ``regex`` format of an answer: a string RE2 compiles (not a string: passes).

    Compiling costs up to tens of milliseconds, so it is charged to the answer's budget like
    matching: the text's length times the compiled size.
    """
    if not isinstance(value, str):
        return True
    try:
        _, size = _compile(value)  # not cached: answers would push the schemas' patterns out
    except PatternRefused:
        return False
    _charge(len(value) * size, f"compiling {_shown(value)} ({size:,} steps) as a regex")
    return True


def is_pattern(value: object) -> bool:
    """The ``regex`` format of a schema's own patterns (checking the schema): what RE2
    compiles, from the cache its answers are then matched with."""
    if not isinstance(value, str):
        return True
    try:
        _compiled(value)
    except PatternRefused:
        return False
    return True


def _scan(schema: Any) -> tuple[list[str], bool, bool]:
    """(every pattern, whether ``patternProperties`` and ``unevaluatedProperties`` occur)."""
    found: list[str] = []
    by_pattern = unevaluated = False
    stack: list[Any] = [schema]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(cast(list[Any], item))
            continue
        if not isinstance(item, dict):
            continue
        for key, value in cast(dict[str, Any], item).items():
            if key in _DATA:
                continue
            if key == "pattern" and isinstance(value, str):
                found.append(value)
            elif key == "patternProperties" and isinstance(value, dict):
                found.extend(cast(dict[str, Any], value))
                by_pattern = True
            unevaluated = unevaluated or key == "unevaluatedProperties"
            if key in _BY_NAME and isinstance(value, dict):
                stack.extend(cast(dict[str, Any], value).values())
            else:
                stack.append(value)
    return found, by_pattern, unevaluated


def schema_pattern_problem(schema: Any) -> str | None:
    """Why a pattern of ``schema`` cannot be matched in bounded time, or None."""
    found, by_pattern, unevaluated = _scan(schema)
    if by_pattern and unevaluated:
        return (
            "unevaluatedProperties cannot be used beside patternProperties: it would match "
            "the patterns with a backtracking engine; use additionalProperties"
        )
    for pattern in dict.fromkeys(found):
        try:
            _compiled(pattern)
        except PatternRefused as e:
            return str(e)
    return None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, by_pattern: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in by_pattern.items():
        for key, value in cast(dict[str, Any], instance).items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    named: Mapping[str, Any] = schema.get("properties", {})
    patterns: Mapping[str, Any] = schema.get("patternProperties", {})
    extras = [
        key
        for key in cast(dict[str, Any], instance)
        if key not in named and not any(_search(p, key) for p in patterns)
    ]
    if validator.is_type(extra, "object"):
        for key in extras:
            yield from validator.descend(instance[key], extra, path=key)
    elif not extra and extras:
        keys = ", ".join(repr(key) for key in sorted(extras))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(p) for p in sorted(patterns))
            yield ValidationError(f"{keys} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({keys} {verb} unexpected)"
            )


_KEYWORDS: dict[str, Callable[..., Iterator[Any]]] = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
}


@cache
def linear(cls: Any) -> Any:
    """``cls`` (a ``jsonschema`` validator class) matching patterns with RE2."""
    return cast(Any, validators.extend(cls, _KEYWORDS))  # pyright: ignore[reportUnknownMemberType]
