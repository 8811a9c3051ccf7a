"""Reading a short answer out of a completion, and refusing the completions that do not commit to one.

:func:`read_answer` is public so that search agents (Search-R1's ``<search>`` / ``<information>`` /
``<answer>`` turns) reuse it. What it reads (docs/qa.md, "What is read"):

- **The response.** The text after the last ``</think>`` when there is one; a ``<think>`` after it is
  never closed, and the text from it on is unfinished reasoning, not read. Retrieved text inside
  ``<information>`` / ``<tool_response>`` blocks (observations a search tool inserted) is never read.
- **Explicit answers**, by precedence: ``<answer>...</answer>`` blocks (Search-R1's format; the last one,
  as verl's ``extract_solution`` reads); else "Answer: X" / "Final answer: X" lines (the last one), or
  "The answer is X." as the final statement of the response; else ``\\boxed{X}`` / ``\\fbox{X}`` (the last).
  A block holding a box, bold, ``$...$`` or an "Answer:" prefix is read inside it.
- **Else** (``read="any"``) the whole response is the answer (``method="whole"``): an RL policy prompted
  for a short answer often writes only the answer. ``read="tagged"`` finds no answer instead.

The reading carries a ``problem`` (the completion scores 0 whatever the gold) when an ``<answer>`` block or
the last box is cut off, when explicit answers disagree (two ``<answer>`` blocks with different contents,
an answer line and a box that differ: a hedge), or when the text after the answer takes it back or hedges
("wait", "actually", "or maybe").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from rewardlab.verifiers.qa.normalize import normalize_answer
from rewardlab.verifiers.response import THINK_OPEN, response_start

READ_MODES = ("tagged", "any")
METHODS = ("answer_tag", "answer_line", "boxed", "whole")
OBSERVATION_TAGS = ("information", "tool_response")

_ANSWER_OPEN, _ANSWER_CLOSE = "<answer>", "</answer>"
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_OBSERVATION = re.compile(r"<(" + "|".join(OBSERVATION_TAGS) + r")>.*?(?:</\1>|\Z)", re.DOTALL)
_BOLD = r"(?:\*\*|__)?"
_LABEL = rf"{_BOLD}[ \t]*(?:(?:the|my)[ \t]+)?(?:final[ \t]+|short[ \t]+|correct[ \t]+)?answer"
_COLON = rf"[ \t]*{_BOLD}[ \t]*[:：]{_BOLD}"  # "Answer:", "**Answer**:", "**Answer:**"
# "Answer: X" / "**Final answer:** X" at the start of a line (after markdown quote/heading/list marks).
_ANSWER_LINE = re.compile(
    rf"^[ \t>#*\-]*{_LABEL}{_COLON}[ \t]*(?P<answer>[^\n]*?)[ \t]*$", re.IGNORECASE | re.MULTILINE
)
# "The answer is X." on the response's last line.
_ANSWER_IS = re.compile(
    r"\b(?:the[ \t]+)?(?:final[ \t]+|short[ \t]+|correct[ \t]+)?answer[ \t]+is[ \t]*:?[ \t]*(?P<answer>[^\n]+?)[ \t]*$",
    re.IGNORECASE,
)
_PREFIX = re.compile(rf"^{_LABEL}(?:{_COLON}|[ \t]+is\b:?)[ \t]*", re.IGNORECASE)
_BOX = re.compile(r"\\(?:boxed|fbox)[ \t]*\{")
_WRAPPER = re.compile(r"^\\(?:boxed|fbox|text|textbf|mathrm|mbox)[ \t]*\{")
_PAIRS = (("**", "**"), ("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
# Text after the answer that takes it back or hedges it.
AFTER_ANSWER = re.compile(
    r"\b(?:wait|oops|actually|scratch that|on second thought|correction|i was wrong|"
    r"(?:that|this|it)(?:'s| is| was) (?:wrong|incorrect|not (?:right|correct))|"
    r"or (?:maybe|perhaps|possibly)|alternatively|not (?:sure|certain))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Candidate:
    """One answer found in a completion: ``text`` (``completion[start:end]``), how it was found
    (:data:`METHODS`), and ``outer_end``: where its statement ends (after ``</answer>`` or the box's brace)."""

    text: str
    method: str
    start: int
    end: int
    outer_start: int
    outer_end: int


@dataclass
class AnswerReading:
    """What :func:`read_answer` found: the answer (None: none found), why the completion must score 0 whatever
    the gold (``problem``), and every explicit answer stated (``stated``)."""

    answer: Candidate | None
    problem: str | None = None
    stated: list[Candidate] = field(default_factory=list)
    note: str | None = None
    """Why no answer was found, when there is more to say than "none"."""


def blank_observations(text: str) -> str:
    """``text`` with every ``<information>`` / ``<tool_response>`` block (an unclosed one to the end) replaced by
    spaces of the same length, so offsets stay those of ``text``."""
    return _OBSERVATION.sub(lambda m: " " * len(m.group(0)), text)


def closing_brace(text: str, open_at: int) -> int | None:
    """Index of the ``}`` that closes the ``{`` at ``open_at`` (backslash-escaped braces skipped), or None."""
    depth, i = 0, open_at
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def unwrap(text: str, start: int, end: int) -> tuple[int, int]:
    """The span of ``text[start:end]`` without surrounding space, bold, ``$...$``, a whole ``\\boxed{}`` /
    ``\\text{}``, or an "Answer:" prefix, repeatedly (``**\\boxed{Paris}**`` gives ``Paris``)."""
    while True:
        span = text[start:end]
        stripped = span.strip()
        start += len(span) - len(span.lstrip())
        end = start + len(stripped)
        span = stripped
        if span[:1] in ("*", "$", "\\"):
            pair = next(
                (
                    p
                    for p in _PAIRS
                    if len(span) > len(p[0]) + len(p[1]) and span.startswith(p[0]) and span.endswith(p[1])
                ),
                None,
            )
            if pair:
                start, end = start + len(pair[0]), end - len(pair[1])
                continue
            wrapper = _WRAPPER.match(span)
            if wrapper and closing_brace(text, start + wrapper.end() - 1) == end - 1:
                start, end = start + wrapper.end(), end - 1
                continue
        prefix = _PREFIX.match(span)
        if prefix and prefix.end() < len(span):
            start += prefix.end()
            continue
        return start, end


def _candidate(text: str, method: str, start: int, end: int, outer: tuple[int, int]) -> Candidate:
    start, end = unwrap(text, start, end)
    return Candidate(text[start:end], method, start, end, outer[0], outer[1])


def _tags(work: str, text: str, start: int, end: int) -> tuple[list[Candidate], str | None]:
    found = [
        _candidate(text, "answer_tag", m.start(1), m.end(1), m.span())
        for m in _ANSWER_TAG.finditer(work, start, end)
    ]
    tail = found[-1].outer_end if found else start
    if work.find(_ANSWER_OPEN, tail, end) >= 0:
        return found, "cut off: an <answer> block is not closed"
    return found, None


def _lines(work: str, text: str, start: int, end: int) -> list[Candidate]:
    found = [
        _candidate(text, "answer_line", m.start("answer"), m.end("answer"), m.span())
        for m in _ANSWER_LINE.finditer(work, start, end)
        if m.group("answer").strip()
    ]
    region_end = len(work[:end].rstrip())
    last_line_at = work.rfind("\n", start, region_end) + 1
    final = _ANSWER_IS.search(work, max(start, last_line_at), region_end)
    if final and not any(c.outer_start <= final.start("answer") < c.outer_end for c in found):
        answer_end = final.end("answer")
        while answer_end > final.start("answer") and work[answer_end - 1] in ".!":
            answer_end -= 1  # the statement's full stop is not part of the answer
        found.append(_candidate(text, "answer_line", final.start("answer"), answer_end, final.span()))
    return found


def _boxes(work: str, text: str, start: int, end: int) -> tuple[list[Candidate], str | None]:
    found: list[Candidate] = []
    for m in _BOX.finditer(work, start, end):
        close = closing_brace(work[:end], m.end() - 1)
        if close is None:
            return found, "cut off: the last \\boxed{} is not closed"
        found.append(_candidate(text, "boxed", m.end(), close, (m.start(), close + 1)))
    return found, None


def _inside(cand: Candidate, outer: list[Candidate]) -> bool:
    return any(o.outer_start <= cand.outer_start and cand.outer_end <= o.outer_end for o in outer)


def read_answer(
    text: str, *, read: str = "any", normalize: Callable[[str], str] = normalize_answer
) -> AnswerReading:
    """Reads the answer of ``text`` (a completion) by the rules of this module's docstring.

    Args:
        text: The completion.
        read: ``any`` (without an explicit answer, the whole response is the answer) or ``tagged``.
        normalize: How two stated answers are compared (different after it: the completion is ambiguous).
    """
    if read not in READ_MODES:
        raise ValueError(f"read must be one of {', '.join(READ_MODES)}, got {read!r}")
    start = response_start(text)
    work = blank_observations(text)
    end = len(text)
    unclosed_think = work.find(THINK_OPEN, start)
    if unclosed_think >= 0:
        end = unclosed_think
    tags, tag_problem = _tags(work, text, start, end)
    lines = [c for c in _lines(work, text, start, end) if not _inside(c, tags)]
    boxes, box_problem = _boxes(work, text, start, end)
    boxes = [c for c in boxes if not _inside(c, tags + lines)]
    stated = sorted(tags + lines + boxes, key=lambda c: c.start)
    chosen = (tags or lines or boxes or [None])[-1]
    problem = tag_problem or (box_problem if not tags and not lines else None)
    if problem:
        return AnswerReading(None, problem=problem, stated=stated)
    if chosen is None:
        return _whole(text, work, start, end, read, unclosed_think >= 0)
    distinct = {normalize(c.text) for c in stated}
    if len(distinct) > 1:
        shown = " / ".join(repr(c.text) for c in stated[:4])
        return AnswerReading(
            chosen, problem=f"ambiguous: the completion states different answers ({shown})", stated=stated
        )
    after = AFTER_ANSWER.search(work, chosen.outer_end, end)
    if after:
        return AnswerReading(
            chosen, problem=f"the answer is taken back or hedged after it ({after.group(0)!r})", stated=stated
        )
    return AnswerReading(chosen, stated=stated)


def _whole(text: str, work: str, start: int, end: int, read: str, unclosed_think: bool) -> AnswerReading:
    note = "the reasoning is not closed: no </think> after the last <think>" if unclosed_think else None
    if read != "any":
        return AnswerReading(None, note=note or "no <answer> block, answer line or \\boxed{} (read=tagged)")
    if not work[start:end].strip():
        return AnswerReading(None, note=note or "the response is empty")
    span_start, span_end = unwrap(text, start, end)
    if work[span_start:span_end] != text[span_start:span_end]:
        # Retrieved text sits inside the response: the whole response is not the model's answer.
        return AnswerReading(None, note="no explicit answer, and the response holds retrieved text")
    return AnswerReading(Candidate(text[span_start:span_end], "whole", span_start, span_end, start, end))
