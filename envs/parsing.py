"""Finding tool calls in a model's turn, in the formats models are trained on.

* ``tool_call``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, the JSON call of the
  Hermes / Qwen chat templates (``arguments`` may also be a JSON string, as in OpenAI's API);
* ``fenced``: a Markdown code block with a language tag, ````` ```python ````` (the ``python`` tool) or
  ````` ```sql ````` (the ``sql`` tool); an untagged block is not a call;
* ``tag``: ``<calculator>12*7</calculator>``, a tool's name as an XML tag around its main argument.

A call that cannot be read (broken JSON, no name, an unclosed tag, a NUL or a lone surrogate in its text) is
a :class:`ToolCall` with ``error`` set: the environment answers it with an observation saying what is wrong,
never an exception. Parsing is bounded before it starts: a call longer than ``max_chars``, JSON nested
deeper than ``max_depth`` or holding a number Python will not hold (``1e999999``, 100,000 digits) is refused
as ``too_large`` without being parsed further.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

FORMATS = ("tool_call", "fenced", "tag")
FENCE_TOOLS = {"python": "python", "py": "python", "python3": "python", "sql": "sql", "sqlite": "sql"}
"""Fence language tag -> the tool a ``fenced`` block calls."""

MAX_CALL_CHARS = 100_000
"""Longest call read, in characters (its whole text, markers included); a longer one is refused unparsed.
Real calls are far shorter (a turn is a few thousand tokens): the limit bounds what one runaway turn costs.
``ToolEnv(max_call_chars=...)`` sets another (from a config: ``env.kwargs``)."""
MAX_CALL_DEPTH = 100
"""Deepest nesting of ``[`` and ``{`` read in a call's JSON (a JSON string of arguments counted on its own),
checked by a scan before parsing: Python's JSON parser recurses once per level and raises ``RecursionError``
near the interpreter's limit (1,000 frames, fewer on a deep stack). ``ToolEnv(max_call_depth=...)`` sets
another."""
MAX_INT_DIGITS = 4300
"""Longest integer read in a call's JSON: Python's own default limit on ``int(str)``, applied here whatever a
program sets it to, so that the refusal is the same everywhere (and never a quadratic conversion)."""

_TOOL_CALL = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.DOTALL)
# A block closes at a fence that starts a line, or that ends the turn (a stop string cut it there): a ```
# inside the code (``print("```")``) does not close it.
_FENCE = re.compile(r"```([A-Za-z0-9_+-]+)[ \t]*\n(.*?)((?<=\n)[ \t]*```|```(?=\s*\Z)|\Z)", re.DOTALL)
# A JSON string (an unterminated one runs to the end) or a bracket: the tokens the depth scan counts.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.DOTALL)
# Characters no tool's text can hold: NUL, and UTF-16 surrogates alone (JSON's "\ud800", or text decoded
# with surrogateescape), which cannot be encoded to pass on to a program, a database or a tokenizer.
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")


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
    kind: str = "malformed"
    """The error kind a call with ``error`` is counted under: ``malformed``, or ``too_large`` when it is over
    a limit (its length, its nesting, a number's size)."""


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


def parse_tool_calls(
    text: str,
    formats: Sequence[str],
    primary: Mapping[str, str],
    *,
    max_chars: int = MAX_CALL_CHARS,
    max_depth: int = MAX_CALL_DEPTH,
) -> list[ToolCall]:
    """Every call in ``text`` in the given ``formats``, in order of position. ``primary`` maps each tool's
    name to the argument a ``fenced`` block or a ``tag`` fills (``{"python": "code"}``). Never raises: a call
    longer than ``max_chars`` or nested deeper than ``max_depth`` is a call with an error."""
    calls: list[ToolCall] = []
    if "tool_call" in formats:
        calls += [_json_call(m, max_chars, max_depth) for m in _TOOL_CALL.finditer(text)]
    if "fenced" in formats:
        for m in _FENCE.finditer(text):
            tool = FENCE_TOOLS.get(m.group(1).lower())
            if tool in primary:
                calls.append(_text_call(tool, {primary[tool]: m.group(2)}, m, m.group(3), "```", max_chars))
    if "tag" in formats:
        for name, arg in primary.items():
            for m in re.finditer(rf"<{re.escape(name)}>(.*?)(</{re.escape(name)}>|$)", text, re.DOTALL):
                calls.append(
                    _text_call(name, {arg: m.group(1).strip()}, m, m.group(2), f"</{name}>", max_chars)
                )
    return sorted(calls, key=lambda c: c.start)


class _Refused(Exception):
    """Why a call is not read: the message, the error kind, and the tool's name when it was read."""

    def __init__(self, message: str, kind: str = "malformed", name: str = "") -> None:
        super().__init__(message)
        self.message, self.kind, self.name = message, kind, name


def _text_call(
    name: str, arguments: dict[str, str], match: re.Match, closing: str, marker: str, max_chars: int
) -> ToolCall:
    """A ``fenced`` or ``tag`` call: its text is its one argument."""
    call = ToolCall(name, arguments, match.group(0), start=match.start())
    try:
        _check_size(call.raw, max_chars)
        if not closing:
            raise _Refused(f"unclosed call: expected {marker!r}")
        _check_text(arguments)
    except _Refused as exc:
        call.error, call.kind = exc.message, exc.kind
    return call


def _json_call(match: re.Match, max_chars: int, max_depth: int) -> ToolCall:
    call = ToolCall("", raw=match.group(0), start=match.start())
    try:
        _check_size(call.raw, max_chars)
        if not match.group(2):
            raise _Refused("unclosed <tool_call>: expected '</tool_call>'")
        payload = _load(match.group(1).strip(), max_depth, "the call is not valid JSON")
        call.name, call.arguments = _name_and_arguments(payload, max_depth)
    except _Refused as exc:
        call.name, call.arguments, call.error, call.kind = exc.name, {}, exc.message, exc.kind
    return call


def _name_and_arguments(payload: Any, max_depth: int) -> tuple[str, dict[str, Any]]:
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str) or not payload["name"]:
        raise _Refused('the call needs {"name": ..., "arguments": {...}}')
    name = payload["name"]
    _check_text(name)
    args = payload.get("arguments", payload.get("parameters", {}))
    try:
        if isinstance(args, str):
            args = _load(args, max_depth, "arguments is a string but not JSON") if args.strip() else {}
        if not isinstance(args, dict):
            raise _Refused("arguments must be a JSON object")
        _check_text(args)
    except _Refused as exc:
        raise _Refused(exc.message, exc.kind, name) from None
    return name, args


def _check_size(raw: str, max_chars: int) -> None:
    if len(raw) > max_chars:
        raise _Refused(f"the call is {len(raw)} characters long (at most {max_chars})", "too_large")


def _check_text(value: Any) -> None:
    """Refuses a NUL or a lone surrogate in any string of a call's name or arguments (keys included); the
    arguments' nesting is bounded already, but the walk keeps its own stack anyway."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str) and (bad := _BAD_CHAR.search(item)):
            what = (
                "a NUL character" if bad.group() == "\x00" else f"a lone surrogate (U+{ord(bad.group()):04X})"
            )
            raise _Refused(f"the call's text holds {what}, which no tool can take")


def _load(text: str, max_depth: int, invalid: str) -> Any:
    """``text`` as JSON, its depth checked first; ``invalid`` starts the message of broken JSON."""
    if _too_deep(text, max_depth):
        raise _Refused(f"the call is nested deeper than {max_depth} levels", "too_large")
    try:
        return _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise _Refused(f"{invalid} ({exc.msg})") from None
    except ValueError as exc:  # backstop of _json_int: a number Python will not convert
        raise _Refused(f"the call holds a number Python cannot read ({exc})", "too_large") from None
    except RecursionError:  # backstop of the depth scan: a deep stack leaves the parser fewer frames
        raise _Refused("the call is nested too deeply", "too_large") from None


def _too_deep(text: str, max_depth: int) -> bool:
    """Whether brackets outside strings nest deeper than ``max_depth``: the same tokens as the parser reads
    up to its first error, where it stops recursing (one regex step per string or bracket)."""
    if text.count("[") + text.count("{") <= max_depth:  # most calls: no scan
        return False
    depth = 0
    for token in _JSON_TOKEN.finditer(text):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
            if depth > max_depth:
                return True
        elif bracket in ("]", "}"):
            depth = max(depth - 1, 0)
    return False


def _json_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"the call holds a number of more than {MAX_INT_DIGITS} digits", "too_large")
    return int(digits)


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999999: Python reads it as inf, which no tool means to receive
        raise _Refused(f"the call holds a number out of range ({text[:20]})", "too_large")
    return value


def _json_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not JSON", name, 0)


# One decoder: json.loads with hooks would build a new one per call.
_DECODER = json.JSONDecoder(parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant)
