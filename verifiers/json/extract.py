"""Reading the one JSON value a completion commits to: the whole text, a fenced block, or the last balanced
object or array, with the refusals that keep a policy from being rewarded for a hedge or a near-JSON.

The reading rules (docs/json.md, "Decision policy"):

- Only the text after the last ``</think>`` is read; a ``<think>`` that is never closed leaves no answer.
- The whole (stripped) text, when it is one JSON value, is the answer (``method="whole"``): any JSON value,
  a string or a number included. A JSON string that holds JSON text stays a string.
- Otherwise the candidates are the bodies of fenced blocks tagged ``json`` or untagged (any value), and the
  balanced ``{...}`` / ``[...]`` spans of the text outside those blocks (objects and arrays only). The last
  candidate that is JSON or looks like it is the answer (``fence`` or ``last_balanced``); it must parse.
- Two candidates that parse to different values are a hedge. Text outside the answer (and its fence) is
  refused unless prose is allowed.

Parsing is strict: the standard library's decoder with NaN / Infinity refused, duplicate keys refused (JSON
parsers disagree on which one wins, so a document with ``{"ok": false, "ok": true}`` means different things
to different readers), raw control characters in strings refused, and the nesting depth checked by a linear
scan before the decoder runs. Every scan here is one pass of a single-character regex, never backtracking.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from typing import Any

from rewardlab.verifiers.response import final_response

FENCE = "```"
JSON_FENCE_LANGS = frozenset({"", "json"})

# One structural character at a time: linear, no backtracking. ``\n`` ends a would-be string in prose.
_SCAN = re.compile(r'[{}\[\]"\\\n]')
_DEPTH_SCAN = re.compile(r'[{}\[\]"\\]')
# After an opening fence: an optional language word, then the body from the next line (or inline).
_FENCE_INFO = re.compile(r"[ \t]*([A-Za-z][A-Za-z0-9_+.-]*)?[ \t]*\r?\n?")
# A balanced span "looks like JSON" when it opens like an object with a key, an empty object, or an array
# of JSON values; prose such as ``{x}`` or ``[citation needed]`` does not.
_LOOKS_LIKE_JSON = re.compile(r'\{\s*["}]|\[\s*(?:[\[\]{"\-0-9]|true\b|false\b|null\b)')
_PREVIEW_CHARS = 200


class JSONTextError(ValueError):
    """Text that is not acceptable JSON: a syntax error, a non-JSON constant, a duplicate key, too deep."""


def _refuse_constant(name: str) -> Any:
    raise JSONTextError(f"{name} is not JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))
        raise JSONTextError(f"duplicate key {duplicate!r}")
    return obj


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, object_pairs_hook=_no_duplicate_keys)


def nesting_depth(text: str) -> int:
    """The deepest nesting of objects and arrays in ``text``, brackets inside JSON strings aside (one pass)."""
    depth = deepest = 0
    in_string = False
    skip = -1
    for match in _DEPTH_SCAN.finditer(text):
        i = match.start()
        if i == skip:
            continue
        char = text[i]
        if in_string:
            if char == "\\":
                skip = i + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def parse_json(text: str, max_depth: int) -> Any:
    """``text`` decoded strictly as one JSON value.

    Raises:
        JSONTextError: not JSON, NaN / Infinity, a duplicate key, or nested deeper than ``max_depth``.
    """
    # Cheap first: without more brackets than the limit the depth cannot exceed it.
    if text.count("{") + text.count("[") > max_depth and nesting_depth(text) > max_depth:
        raise JSONTextError(f"nested deeper than max_depth={max_depth}")
    try:
        return _DECODER.decode(text)
    except JSONTextError:
        raise
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, int too long to convert
        raise JSONTextError(str(exc)) from None


def canonical(value: Any) -> str:
    """A text equal for equal JSON values (key order aside; ``1``, ``1.0`` and ``true`` stay apart)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass
class Fence:
    """A fenced code block: ``start``/``end`` cover the markers, ``body_start``/``body_end`` the content."""

    start: int
    end: int
    body_start: int
    body_end: int
    lang: str
    closed: bool

    @property
    def is_json(self) -> bool:
        return self.lang in JSON_FENCE_LANGS


def find_fences(text: str) -> list[Fence]:
    """The triple-backtick blocks of ``text`` in order (markers paired left to right; an unpaired last one
    runs to the end of the text with ``closed=False``)."""
    fences = []
    pos = 0
    while (open_at := text.find(FENCE, pos)) >= 0:
        info = _FENCE_INFO.match(text, open_at + len(FENCE))
        body_start = info.end()
        close_at = text.find(FENCE, body_start)
        lang = (info.group(1) or "").lower()
        if close_at < 0:
            fences.append(Fence(open_at, len(text), body_start, len(text), lang, closed=False))
            break
        fences.append(Fence(open_at, close_at + len(FENCE), body_start, close_at, lang, closed=True))
        pos = close_at + len(FENCE)
    return fences


def balanced_spans(text: str, start: int, end: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The outermost balanced ``{...}`` / ``[...]`` spans of ``text[start:end]``, and the broken regions:
    outermost brackets that never balance, from the bracket to where the scan gave up on it. Both as
    ``[start, end)`` offsets in ``text``, in order.

    One pass with a stack. Quotes open a string only inside a bracket (prose quotes are not JSON), and a
    string respects backslash escapes, so a ``{`` inside a string is no delimiter. A closing bracket of the
    wrong kind, or a raw newline inside a string (never valid JSON), breaks the brackets open so far; so does
    the end of the text. Spans nested in a later, larger span are replaced by it (amortised linear).
    """
    stack: list[tuple[str, int]] = []
    spans: list[tuple[int, int]] = []
    broken: list[tuple[int, int]] = []
    in_string = False
    skip = -1
    for match in _SCAN.finditer(text, start, end):
        i = match.start()
        if i == skip:
            continue
        char = text[i]
        if in_string:
            if char == "\\":
                skip = i + 1
            elif char == '"':
                in_string = False
            elif char == "\n":
                in_string = False
                broken.append((stack[0][1], i))
                stack.clear()
        elif char in "{[":
            stack.append(("}" if char == "{" else "]", i))
        elif char in "}]":
            if stack and stack[-1][0] == char:
                opened = stack.pop()[1]
                while spans and spans[-1][0] > opened:
                    spans.pop()
                spans.append((opened, i + 1))
            elif stack:
                broken.append((stack[0][1], i + 1))
                stack.clear()
        elif char == '"' and stack:
            in_string = True
    if stack:
        broken.append((stack[0][1], end))
    return spans, broken


@dataclass
class Candidate:
    """A piece of the answer text that may be the JSON answer. Offsets are in the answer text."""

    method: str
    """``fence`` or ``last_balanced``."""
    start: int
    end: int
    outer_start: int
    """Start of what the answer occupies (the fence's opening marker for a fenced block)."""
    outer_end: int
    text: str
    looks_like_json: bool
    value: Any = None
    error: str | None = None
    inside_broken: bool = False
    """A balanced span inside brackets that never balance: part of a cut-off or malformed document."""

    @property
    def parsed(self) -> bool:
        return self.error is None


@dataclass
class Extraction:
    """What was read from a completion. ``value`` is meaningful when ``reason`` is ``None``."""

    text: str | None = None
    """The JSON text read (or the text that failed to be JSON)."""
    span: tuple[int, int] | None = None
    """``[start, end)`` of ``text`` in the completion text."""
    method: str | None = None
    """``whole``, ``fence`` or ``last_balanced``; ``None`` when nothing was read."""
    value: Any = None
    reason: str | None = None
    """Why nothing can be scored (the reward is 0), or ``None``."""
    competing: str | None = None
    """For a hedge: the other JSON text."""

    @property
    def ok(self) -> bool:
        return self.reason is None


def _preview(text: str) -> str:
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 3] + "..."


def _candidate(method: str, body: str, start: int, end: int, outer: tuple[int, int], looks: bool, depth: int):
    # The candidate's own text, stripped, with its offsets adjusted to the stripped text.
    raw = body[start:end]
    lead = len(raw) - len(raw.lstrip())
    text = raw.strip()
    cand = Candidate(method, start + lead, start + lead + len(text), outer[0], outer[1], text, looks)
    try:
        cand.value = parse_json(text, depth)
    except JSONTextError as exc:
        cand.error = str(exc)
    return cand


def candidates(body: str, max_depth: int) -> tuple[list[Candidate], Fence | None]:
    """Every fenced JSON block and every balanced span outside them, in text order, and the first unclosed
    JSON fence (``None`` when every JSON fence is closed)."""
    found: list[Candidate] = []
    unclosed = None
    segment_start = 0
    segments = []
    for fence in find_fences(body):
        if not fence.is_json:
            continue
        if not fence.closed:
            unclosed = fence
        segments.append((segment_start, fence.start))
        segment_start = fence.end
        content = body[fence.body_start : fence.body_end].strip()
        looks = fence.lang == "json" or content[:1] in ("{", "[")
        found.append(
            _candidate(
                "fence", body, fence.body_start, fence.body_end, (fence.start, fence.end), looks, max_depth
            )
        )
    segments.append((segment_start, len(body)))
    for seg_start, seg_end in segments:
        spans, broken = balanced_spans(body, seg_start, seg_end)
        broken_starts = [start for start, _ in broken]
        for start, end in spans:
            looks = _LOOKS_LIKE_JSON.match(body, start) is not None
            cand = _candidate("last_balanced", body, start, end, (start, end), looks, max_depth)
            # broken regions are disjoint and in order: only the last one opened before this span can hold it
            before = bisect.bisect_left(broken_starts, start) - 1
            cand.inside_broken = before >= 0 and broken[before][1] >= end
            found.append(cand)
        for start, end in broken:
            if _LOOKS_LIKE_JSON.match(body, start):
                text = body[start:end].strip()
                error = "the brackets never balance (cut off or malformed)"
                found.append(
                    Candidate("last_balanced", start, start + len(text), start, end, text, True, error=error)
                )
    found.sort(key=lambda c: c.start)
    return found, unclosed


def extract_json(text: str, *, allow_prose: bool, max_chars: int, max_depth: int) -> Extraction:
    """The JSON value ``text`` (a completion) commits to, or the reason it commits to none (module doc)."""
    offset, body = final_response(text)
    if body is None:
        return Extraction(reason="the reasoning is never closed (<think> without </think>): no final answer")
    if len(body) > max_chars:
        return Extraction(reason=f"the answer is {len(body)} characters, over max_chars={max_chars}")
    stripped = body.strip()
    if not stripped:
        return Extraction(reason="empty answer")
    lead = len(body) - len(body.lstrip())
    whole_span = (offset + lead, offset + lead + len(stripped))
    try:
        value = parse_json(stripped, max_depth)
        return Extraction(text=stripped, span=whole_span, method="whole", value=value)
    except JSONTextError as exc:
        whole_error = str(exc)
    found, unclosed = candidates(body, max_depth)
    if unclosed is not None:
        return Extraction(
            text=body[unclosed.body_start :].strip() or None,
            span=(offset + unclosed.body_start, offset + len(body)),
            method="fence",
            reason="a ```json block is never closed (cut off?)",
        )
    answers = [c for c in found if c.parsed or c.looks_like_json]
    if not answers:
        return Extraction(reason=f"no JSON found (the whole text is not JSON: {whole_error})")
    final = answers[-1]
    read = Extraction(text=final.text, span=(offset + final.start, offset + final.end), method=final.method)
    if not final.parsed:
        read.reason = f"not valid JSON: {final.error}"
        return read
    if final.inside_broken:
        read.reason = "the JSON sits inside brackets that never balance (a cut-off or malformed document)"
        return read
    mine = canonical(final.value)
    other = next((c for c in found if c.parsed and c is not final and canonical(c.value) != mine), None)
    if other is not None:
        read.competing = _preview(other.text)
        read.reason = "hedge: the completion holds two different JSON values"
        return read
    outside = body[: final.outer_start] + body[final.outer_end :]
    if not allow_prose and outside.strip():
        read.reason = f"text outside the JSON ({_preview(outside.strip())!r}) and allow_prose is off"
        return read
    read.value = final.value
    return read
