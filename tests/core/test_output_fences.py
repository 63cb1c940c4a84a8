"""Fenced blocks in a final answer are found in linear time (issue 22, item 5).

The old pattern ``r"```[a-zA-Z]*[ \\t]*\\n?(.*?)```"`` gave back one letter of the language
word at a time after an unclosed fence, each time scanning to the end: 100 KB of letters
took about a minute. These tests check the work done by counting it, not by timing it.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hpd_agent import OutputValidationError
from hpd_agent._core.output import fenced, output_spec

OLD_FENCE = re.compile(r"```[a-zA-Z]*[ \t]*\n?(.*?)```", re.DOTALL)


class _Counting(str):
    """A text that records where each ``find`` on it starts."""

    starts: list[int]

    def find(self, sub: str, *args: int) -> int:  # type: ignore[override]
        self.starts.append(args[0] if args else 0)
        return super().find(sub, *args)


def _counted(text: str) -> tuple[list[str], list[int]]:
    counting = _Counting(text)
    counting.starts = []
    return list(fenced(counting)), counting.starts


@given(st.text(alphabet="`ab \t\n{}1", max_size=60))
def test_the_scan_finds_what_the_old_pattern_found(text: str) -> None:
    assert list(fenced(text)) == [m.group(1) for m in OLD_FENCE.finditer(text)]


@pytest.mark.parametrize(
    ("text", "bodies"),
    [
        ("```json\n{}\n```", ["{}\n"]),
        ("a ```py  \nx``` b ```y```", ["x", ""]),  # "y" is read as a language
        ("````x````", ["`x"]),
        ("```é\n1```", ["é\n1"]),  # only ASCII letters name a language
        ("```json\n{} and never closed", []),
    ],
)
def test_fence_edges(text: str, bodies: list[str]) -> None:
    assert list(fenced(text)) == bodies


def test_an_unclosed_fence_in_a_megabyte_is_scanned_once() -> None:
    text = " ```\nx``` " * 3 + "```" + "a" * 1_000_000
    bodies, starts = _counted(text)
    assert bodies == ["x"] * 3
    # Two searches per block and one for the open fence at the end, each starting after
    # the one before: every character is looked at a bounded number of times.
    assert len(starts) <= 2 * len(bodies) + 2
    assert starts == sorted(starts)


def test_a_megabyte_answer_with_an_unclosed_fence_is_refused_not_hung() -> None:
    spec = output_spec(dict[str, int], retries=0, agent_name="A")
    assert spec is not None
    answer = "Here: ```" + "x" * 1_000_000
    value, message = spec.check('```json\n{"a": 1}```', 0)
    assert value == {"a": 1} and message is None
    with pytest.raises(OutputValidationError) as e:
        spec.check(answer, 0)
    assert "no JSON value was found" in str(e.value)
