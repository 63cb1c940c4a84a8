"""Tool-call arguments over AG-UI: TOOL_CALL_ARGS always carries JSON text.

``ToolCallStarted.arguments`` is a dict; the AG-UI stream carries it as JSON text. AG-UI
requires that text to parse (ag-ui-validate rule AGUI204), so arguments that did not parse
go out as ``{}``: the model's own text stays on the run's event (``raw_arguments``) and the
call's result tells what was wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Server, assert_conformant, post_run, run_input


def test_tool_call_args_carry_the_arguments_as_json_even_when_they_did_not_parse(
    server: Server, tmp_path: Path
) -> None:
    with server.client() as c:
        raw, events = post_run(c, run_input("t", "r1", "broken arguments"))
    assert_conformant(raw, tmp_path, "broken-arguments")
    names = {e["toolCallId"]: e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"}
    deltas = [e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS"]
    assert list(names.values()) == ["write_note", "write_note"]
    broken, parsed = deltas
    assert broken == "{}"  # did not parse: the empty dict, never broken JSON
    assert json.loads(parsed) == {"line": "é ünïcode"}  # parsed: the dict as JSON
    results = [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert "Invalid arguments for tool 'write_note'" in results[0]
    assert events[-1]["type"] == "RUN_FINISHED"
