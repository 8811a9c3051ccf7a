"""Reading a completion's final answer the way a careful grader does, and refusing the ambiguous ones.

An RL policy learns every input its verifier wrongly accepts, so finding *an* answer is not enough: the
reader also says when the completion does not commit to one. The policy (docs/math.md, "Decision policy"):

- **What is read.** The response after the last ``</think>`` when there is one (the reasoning is a draft).
  Explicit answers are box groups (boxes listed together, ``\\boxed{1} and \\boxed{2}``, are one answer;
  with the ``last`` box rule every box is its own answer), ``<answer>`` tags, ``####`` lines and "the answer
  is ..." phrases with a value in them; a percent sign or word right after a box is part of its answer
  (``\\boxed{20}\\%``); an explicit answer whose surrounding text is copied from the prompt (a worked example)
  is not the model's.
- **Which answer.** The latest explicit answer of the kinds the mode allows (a later "Final answer: ..."
  corrects earlier work); without one, the later of the last math span and the last number (``auto``).
- **When it scores 0** (:attr:`Reading.problem`): the last box is cut off (no fallback to an earlier box);
  the answer is negated right before it ("is not \\boxed{5}"; a negation inside the answer only matches a
  negated gold answer, :mod:`.verifier`); the text after it retracts or hedges it
  ("wait", "that is wrong", "or maybe"), or is glued to it / cut off inside a brace (``\\boxed{59}{94}{7``);
  digits, letters or a value are glued to the end of one of its boxes (``\\boxed{99}69``, ``\\boxed{5}\\pi``;
  after a space, ``\\boxed{5} cm``, it is prose); the answer is malformed LaTeX whose prefix alone would
  parse, or has a ``\\sqrt`` / ``\\frac`` whose arguments have no single reading (``\\sqrt(16)``,
  ``\\frac123``). The verifier adds the checks that need
  equivalence (:attr:`Reading.must_agree`): a different answer stated after the chosen one, or a boxed
  answer with a different box elsewhere, makes the completion ambiguous.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from rewardlab.verifiers.math.extract import (
    Span,
    answer_is_spans,
    brace_map,
    extract_answer_tag_span,
    extract_last_math_span,
    extract_last_number_span,
    extract_last_value_span,
    find_boxes,
    group_boxes,
    group_contents,
    gsm8k_spans,
    resolve_mode,
)
from rewardlab.verifiers.math.normalize import malformed, malformed_command, strip_wrappers
from rewardlab.verifiers.response import response_start

EXPLICIT_KINDS = ("answer_tag", "boxed", "gsm8k", "answer_is")
# When two explicit answers overlap (``The answer is \boxed{5}``), they are one statement: the higher kind.
_PRIORITY = {kind: rank for rank, kind in enumerate(EXPLICIT_KINDS)}
# Text after the final answer that takes it back or hedges it.
RETRACTION = re.compile(
    r"\b(?:wait|oops|hmm+|actually|scratch that|disregard|on second thought|correction|mistake|"
    r"(?:that|this|it)(?:'s| is| was) (?:wrong|incorrect|not (?:right|correct))|(?:is|was) (?:wrong|incorrect)|"
    r"let me (?:re\w*|try again|start over)|re-?(?:calculat|comput|consider|evaluat|do)\w*)\b",
    re.IGNORECASE,
)
HEDGE = re.compile(
    r"\b(?:or (?:maybe|possibly|perhaps)|alternatively|could also be|might (?:also )?be|or else|"
    r"not (?:sure|certain)|unsure|possibly|perhaps|maybe|another (?:possible )?answer)\b",
    re.IGNORECASE,
)
# "is not", "isn't", "\neq" right before the answer (only spaces and math delimiters between).
_NEGATION_BEFORE = re.compile(
    r"(?:\bnot|n't|\bnever|\\neq?|≠|!=)\s*(?:equal\s+to|equals?|be)?\s*[:=]?\s*(?:\$+|\\\(|\\\[)?\s*$",
    re.IGNORECASE,
)
# An answer-is phrase counts as an answer only if it holds a value (a digit, math, or a short token like "B").
_STATES_VALUE = re.compile(r"\d|\$|\\|^\W*[A-Za-z]\W*$")
_COPY_CONTEXT = 40
_MIN_COPY = 15
# A percent sign or word right after a box belongs to its answer: ``\boxed{20}\%``, ``$\boxed{20}$ percent``.
_PERCENT_AFTER = re.compile(r"[ \t]*\$?[ \t]*(?:\\%|%|(?:percent(?:age)?|pct)\b)", re.IGNORECASE)
_HAS_PERCENT = re.compile(r"(?:\\?%|percent(?:age)?|pct)\s*$", re.IGNORECASE)
# Text glued (no space) to the end of a box that makes it a different answer: digits or letters
# (``\boxed{99}69``, ``\boxed{5}cm``), a value command (``\boxed{5}\pi``) or an operator with its operand
# (``\boxed{5}/2``). Punctuation, closing delimiters, ``\text{...}`` units and spacing are not.
_GLUED_VALUE = re.compile(
    r"[^\W_]|\\(?:pi|sqrt|[dtc]?frac|cdot|times|div|pm|mp|infty|[dt]?binom)(?![A-Za-z])|[+\-*/](?=[^\W_]|\\|\{|\()"
)


@dataclass(frozen=True)
class Candidate:
    """One answer found in a completion: ``text`` (a box group's distinct contents joined by ``", "``),
    the extractor ``kind`` and where it is (offsets in the full completion)."""

    text: str
    kind: str
    start: int
    end: int
    parts: int = 1


@dataclass
class Reading:
    """What :func:`read_answer` found: the answer, why it must score 0 (``problem``), and the other explicit
    answers that must be equivalent to it for it to count (``must_agree``)."""

    answer: Candidate | None
    problem: str | None = None
    must_agree: list[Candidate] = field(default_factory=list)


def box_groups(text: str, offset: int = 0, rule: str = "group") -> tuple[list[Candidate], bool]:
    """The box groups of ``text[offset:]`` as candidates (``rule``: :data:`.extract.BOX_RULES`), and whether
    its last box is cut off. A percent sign or word right after a one-answer group is part of its answer."""
    boxes = find_boxes(text[offset:])
    truncated = bool(boxes) and not boxes[-1].closed
    out = []
    for group in group_boxes(text[offset:], boxes, rule):
        contents = group_contents(group)
        answer, end = ", ".join(contents), offset + group[-1].end
        percent = _PERCENT_AFTER.match(text, end) if len(contents) == 1 else None
        if percent and not _HAS_PERCENT.search(answer):
            answer, end = f"{answer}\\%", percent.end()
        out.append(Candidate(answer, "boxed", offset + group[0].start, end, len(contents)))
    return out, truncated


def _shift(span: Span | None, kind: str, offset: int) -> Candidate | None:
    return None if span is None else Candidate(span.text, kind, offset + span.start, offset + span.end)


def explicit_answers(text: str, offset: int = 0, boxes: str = "group") -> tuple[list[Candidate], bool]:
    """Every explicit answer of ``text[offset:]`` in order of position (overlapping statements merged; box
    groups by the ``boxes`` rule), and whether the last box is cut off."""
    response = text[offset:]
    found, truncated = box_groups(text, offset, boxes)
    tag = _shift(extract_answer_tag_span(response), "answer_tag", offset)
    if tag is not None:
        found.append(tag)
    found += [c for s in gsm8k_spans(response) if (c := _shift(s, "gsm8k", offset))]
    found += [
        c
        for s in answer_is_spans(response)
        if _STATES_VALUE.search(s.text) and (c := _shift(s, "answer_is", offset))
    ]
    found.sort(key=lambda c: (c.start, _PRIORITY[c.kind]))
    merged: list[Candidate] = []
    for cand in found:
        clash = next((m for m in merged if cand.start < m.end and m.start < cand.end), None)
        if clash is None:
            merged.append(cand)
        elif _PRIORITY[cand.kind] < _PRIORITY[clash.kind]:
            merged[merged.index(clash)] = cand
    return merged, truncated


def copied_from_prompt(text: str, cand: Candidate, prompt: str) -> bool:
    """Whether the answer and the text right before it appear verbatim in the prompt (a worked example)."""
    if not prompt:
        return False
    context = text[max(0, cand.start - _COPY_CONTEXT) : cand.end]
    return len(context) >= _MIN_COPY and context in prompt


def _fallback(text: str, offset: int, chain: Sequence[str]) -> Candidate | None:
    response = text[offset:]
    if "last_math" in chain and "last_number" in chain:
        span = extract_last_value_span(response)
        kind = "last_math" if span is not None and span == extract_last_math_span(response) else "last_number"
        return _shift(span, kind, offset)
    if "last_math" in chain:
        return _shift(extract_last_math_span(response), "last_math", offset)
    if "last_number" in chain:
        return _shift(extract_last_number_span(response), "last_number", offset)
    return None


def _glued_to_a_box(text: str, answer: Candidate) -> str | None:
    """Text glued to the end of a box of ``answer`` that makes it a different answer (``\\boxed{99}69``)."""
    for box in find_boxes(text[answer.start : answer.end]):
        tail = text[answer.start + box.end : answer.start + box.end + 12]
        if box.closed and _GLUED_VALUE.match(tail):
            return f"text glued to the end of the box makes a different answer ({tail!r})"
    return None


def _problem_after(text: str, answer: Candidate) -> str | None:
    rest = text[answer.end :]
    if rest[:1] in ("{", "^", "_"):
        return f"text glued to the end of the answer ({rest[:12]!r})"
    glued = _glued_to_a_box(text, answer)
    if glued:
        return glued
    if brace_map(rest)[1]:
        return "the text after the final answer is cut off inside a brace"
    for pattern, what in ((RETRACTION, "retracted"), (HEDGE, "hedged")):
        match = pattern.search(rest)
        if match:
            return f"the final answer is {what} after it ({match.group(0)!r})"
    return None


def answer_problem(text: str, answer: Candidate) -> str | None:
    """Why ``answer`` does not count whatever the gold answer is, or ``None``."""
    if _NEGATION_BEFORE.search(text[max(0, answer.start - 30) : answer.start]):
        return "the answer is negated right before it"
    answer_text = strip_wrappers(answer.text)
    broken = malformed(answer_text)
    if broken:
        return f"malformed answer: {broken}"
    return malformed_command(answer_text) or _problem_after(text, answer)


def _agreements(explicit: list[Candidate], answer: Candidate) -> list[Candidate]:
    """Explicit answers stated after ``answer`` must agree with it; so must every box before it, unless the
    answer is a later explicit statement (boxes before "Final answer: ..." are intermediate work)."""
    later = [c for c in explicit if c.end > answer.start and c != answer]
    if answer.kind in EXPLICIT_KINDS and answer.kind != "boxed":
        return later
    return later + [c for c in explicit if c.kind == "boxed" and c.end <= answer.start]


def read_answer(
    text: str, mode: str | Sequence[str] = "auto", prompt: str = "", boxes: str = "group"
) -> Reading:
    """The final answer of ``text`` under extraction ``mode`` (a mode name or extractor chain) and box rule
    ``boxes`` (``group`` or ``last``), with the problems that make it score 0 and the answers that must
    agree with it (module docstring)."""
    chain = resolve_mode(mode) if isinstance(mode, str) else tuple(mode)
    offset = response_start(text)
    explicit, truncated = explicit_answers(text, offset, boxes)
    if truncated and "boxed" in chain:
        return Reading(None, "the last \\boxed{} is cut off (no fallback to an earlier answer)")
    explicit = [c for c in explicit if not copied_from_prompt(text, c, prompt)]
    allowed = [c for c in explicit if c.kind in chain]
    answer = max(allowed, key=lambda c: c.end) if allowed else None
    if answer is None:
        answer = _fallback(text, offset, chain)
        if answer is not None and copied_from_prompt(text, answer, prompt):
            return Reading(None, "the only answer found is copied from the prompt")
        # a number inside an explicit answer (``\boxed{59}{94}`` read by ``last_number``) is that answer
        answer = next(
            (c for c in explicit if answer and c.start < answer.end and answer.start < c.end), answer
        )
    if answer is None:
        return Reading(None)
    others = _agreements(explicit, answer)
    glued = next((g for c in others if c.kind == "boxed" and (g := _glued_to_a_box(text, c))), None)
    return Reading(answer, answer_problem(text, answer) or glued, others)


def extract_answer(
    text: str, mode: str | Sequence[str] = "auto", boxes: str = "group"
) -> tuple[str | None, str | None]:
    """(answer text, extractor name) of ``text`` under ``mode`` and box rule ``boxes``; ``(None, None)`` when
    there is none."""
    answer = read_answer(text, mode, boxes=boxes).answer
    return (answer.text.strip(), answer.kind) if answer is not None else (None, None)
