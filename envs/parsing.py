"""Finding tool calls in a model's turn, in the formats models are trained on.

* ``tool_call``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, the JSON call of the
  Hermes / Qwen chat templates (``arguments`` may also be a JSON string, as in OpenAI's API);
* ``fenced``: a Markdown code block with a language tag, ````` ```python ````` (the ``python`` tool) or
  ````` ```sql ````` (the ``sql`` tool); an untagged block is not a call;
* ``tag``: ``<calculator>12*7</calculator>``, a tool's name as an XML tag around its main argument.

A call that cannot be read (broken JSON, no name, an unclosed tag) is a :class:`ToolCall` with ``error``
set: the environment answers it with an observation saying what is wrong, never an exception.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("tool_call", "fenced", "tag")
FENCE_TOOLS = {"python": "python", "py": "python", "python3": "python", "sql": "sql", "sqlite": "sql"}
"""Fence language tag -> the tool a ``fenced`` block calls."""

_TOOL_CALL = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
# A block closes at a fence that starts a line, or that ends the turn (a stop string cut it there): a ```
# inside the code (``print("```")``) does not close it.
_FENCE = re.compile(r"```([A-Za-z0-9_+-]+)[ \t]*\n(.*?)((?<=\n)[ \t]*```|```(?=\s*\Z)|\Z)", re.DOTALL)


@dataclass
class ToolCall:
    """One call found in a turn: the tool's name and its arguments, or why it could not be read."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    """The call's text as the model wrote it."""
    error: str | None = None
    """Why the call is malformed (``None``: well formed)."""
    start: int = 0
    """Where the call starts in the turn (calls run in this order)."""


def stop_strings(formats: Sequence[str], tools: Sequence[str]) -> list[str]:
    """Strings that end a model turn right after a call closes, so that the model never writes the tool's
    output itself (a ``fenced`` block ends at a fence line: its language tag keeps the opening one apart)."""
    stops: list[str] = []
    if "tool_call" in formats:
        stops.append("</tool_call>")
    if "fenced" in formats and any(t in FENCE_TOOLS.values() for t in tools):
        stops.append("```\n")
    if "tag" in formats:
        stops += [f"</{name}>" for name in tools]
    return stops


def parse_tool_calls(text: str, formats: Sequence[str], primary: Mapping[str, str]) -> list[ToolCall]:
    """Every call in ``text`` in the given ``formats``, in order of position. ``primary`` maps each tool's
    name to the argument a ``fenced`` block or a ``tag`` fills (``{"python": "code"}``)."""
    calls: list[ToolCall] = []
    if "tool_call" in formats:
        calls += [_json_call(m) for m in _TOOL_CALL.finditer(text)]
    if "fenced" in formats:
        for m in _FENCE.finditer(text):
            tool = FENCE_TOOLS.get(m.group(1).lower())
            if tool in primary:
                calls.append(
                    _closed(
                        ToolCall(tool, {primary[tool]: m.group(2)}, m.group(0), start=m.start()),
                        m.group(3),
                        "```",
                    )
                )
    if "tag" in formats:
        for name, arg in primary.items():
            for m in re.finditer(rf"<{re.escape(name)}>(.*?)(</{re.escape(name)}>|$)", text, re.DOTALL):
                calls.append(
                    _closed(
                        ToolCall(name, {arg: m.group(1).strip()}, m.group(0), start=m.start()),
                        m.group(2),
                        f"</{name}>",
                    )
                )
    return sorted(calls, key=lambda c: c.start)


def _closed(call: ToolCall, closing: str, marker: str) -> ToolCall:
    if not closing:
        call.error = f"unclosed call: expected {marker!r}"
    return call


def _json_call(match: re.Match) -> ToolCall:
    body, raw, start = match.group(1).strip(), match.group(0), match.start()
    if not match.group(2):
        return ToolCall("", raw=raw, error="unclosed <tool_call>: expected '</tool_call>'", start=start)
    try:
        payload = json.loads(body)
    except ValueError as exc:
        return ToolCall("", raw=raw, error=f"the call is not valid JSON ({exc.msg})", start=start)
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str) or not payload["name"]:
        return ToolCall("", raw=raw, error='the call needs {"name": ..., "arguments": {...}}', start=start)
    args = payload.get("arguments", payload.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return ToolCall(payload["name"], raw=raw, error="arguments is a string but not JSON", start=start)
    if not isinstance(args, dict):
        return ToolCall(payload["name"], raw=raw, error="arguments must be a JSON object", start=start)
    return ToolCall(payload["name"], args, raw, start=start)
