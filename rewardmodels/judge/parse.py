"""Parsing a judge's verdict out of free text: a 1-10 score, yes/no, or A/B (and a tie).

Judges reason first and state the verdict at the end, in many spellings. Every pattern below is searched
for, and the verdict is the **last** match in the text (a judge may quote a format or change its mind
before concluding). Forms understood (case-insensitive, Markdown ``**bold**`` allowed around the label):

* ``\\boxed{7}``, ``\\boxed{7/10}``, ``\\boxed{\\text{A}}``, ``\\boxed{yes}``;
* ``Score: 7``, ``Score: 7/10``, ``Rating = 8.5``, ``Final score: [[6]]``, ``Score: seven``;
* ``Verdict: A``, ``Final verdict: [[B]]``, ``Better response: Response A``, ``Winner: B``, ``Verdict: tie``;
* ``Verdict: yes``, ``Answer: No``, ``Judgement: correct`` / ``incorrect``, ``Correct: true``;
* MT-Bench's double brackets on their own: ``[[7]]``, ``[[A]]``, ``[[C]]`` (a tie);
* a bare ``7/10`` (the scale's maximum after the slash).

When the last match is malformed (a score out of range, a denominator other than the scale's maximum, a
word that is no verdict) the text has no verdict: :func:`parse_verdict` raises :class:`VerdictError` with
the reason, and a judge turns that into an error result rather than guessing from earlier text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

KINDS = ("score", "binary", "pairwise")

_WORDS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_YES = {"yes", "true", "correct", "right", "y", "pass", "accept", "equivalent"}
_NO = {"no", "false", "incorrect", "wrong", "n", "fail", "reject", "not equivalent", "not correct"}
_TIE = {"tie", "c", "draw", "equal", "both", "neither"}


class VerdictError(ValueError):
    """No verdict could be read from a judge's output; the message says why."""


@dataclass
class Verdict:
    """A verdict found in a judge's output.

    Attributes:
        kind: ``"score"``, ``"binary"`` or ``"pairwise"``.
        value: The score (a float), ``"yes"`` / ``"no"``, or ``"A"`` / ``"B"`` / ``"tie"``.
        start: Character offset of the verdict's value in the output (for its token probability).
        end: Exclusive end offset of the value.
        pattern: The form it was written in (``"boxed"``, ``"label"``, ``"brackets"``, ``"fraction"``).
        raw: The value as written.
    """

    kind: str
    value: Any
    start: int
    end: int
    pattern: str
    raw: str

    @property
    def numeric(self) -> float:
        """The verdict as a number: the score; 1/0 for yes/no; 1/0/0.5 for A/B/tie."""
        if self.kind == "score":
            return float(self.value)
        if self.kind == "binary":
            return 1.0 if self.value == "yes" else 0.0
        return {"A": 1.0, "B": 0.0}.get(self.value, 0.5)


_SCORE_LABELS = r"(?:final\s+|overall\s+)?(?:score|rating|grade|mark)"
_BINARY_LABELS = (
    r"(?:final\s+)?(?:verdict|judg(?:e)?ment|decision|answer|conclusion|correct(?:ness)?|is\s+correct|"
    r"equivalent|evaluation)"
)
_PAIR_LABELS = (
    r"(?:final\s+)?(?:verdict|judg(?:e)?ment|decision|answer|winner|choice|preference|preferred(?:\s+response)?|"
    r"better(?:\s+(?:response|answer|output|one))?)"
)
# The text between a label and its value: optional "is", markdown stars, a colon or equals sign, an
# opening "[[" or "(".
_SEP = r"[\s*_]*(?:is\s*)?[:=][\s*_]*(?:\[\[\s*|\(\s*)?"
_SCORE_VALUE = r"(?P<v>[+-]?\d+(?:\.\d+)?|" + "|".join(_WORDS) + r")(?:\s*(?:/|out\s+of)\s*(?P<den>\d+))?"
_BIN_VALUE = r"(?P<v>not\s+equivalent|not\s+correct|[a-z]+)\b"
_PAIR_VALUE = r"(?:(?:response|assistant|output|answer|model|option)\s*)?\(?(?P<v>[a-z]+)\b"


def _boxed_spans(text: str) -> list[tuple[int, int]]:
    """Content spans of every ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces balanced)."""
    spans = []
    for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
            i += 1
        if depth == 0:
            spans.append((m.end(), i - 1))
    return spans


def _unwrap(text: str, start: int, end: int) -> tuple[int, int]:
    """Strips ``\\text{...}`` / ``\\textbf{...}`` wrappers and spaces from a span; returns the inner span."""
    while True:
        inner = text[start:end]
        m = re.fullmatch(r"\s*\\(?:text|textbf|mathrm|mathbf)\s*\{(.*)\}\s*", inner, re.S)
        if not m:
            break
        start, end = start + m.start(1), start + m.end(1)
    while start < end and text[start] in " \t\n*_$":
        start += 1
    while end > start and text[end - 1] in " \t\n*_$.":
        end -= 1
    return start, end


def _candidates(text: str, kind: str, scale_max: int) -> list[tuple[int, int, int, str, str, str | None]]:
    """All verdict-like matches: ``(order, start, end, pattern, raw value, denominator)``."""
    found: list[tuple[int, int, int, str, str, str | None]] = []
    for s, e in _boxed_spans(text):
        s, e = _unwrap(text, s, e)
        raw = text[s:e]
        den = None
        if kind == "score":
            m = re.fullmatch(r"(.*?)\s*(?:/|\\over|out\s+of)\s*(\d+)", raw, re.S)
            if m:
                den = m.group(2)
                e = s + len(m.group(1))
                raw = m.group(1)
        found.append((s, s, e, "boxed", raw, den))
    if kind == "score":
        patterns = [
            ("label", re.compile(r"\b" + _SCORE_LABELS + _SEP + _SCORE_VALUE, re.I)),
            ("brackets", re.compile(r"\[\[\s*" + _SCORE_VALUE + r"\s*\]\]", re.I)),
            (
                "fraction",
                re.compile(r"(?<![\w./])(?P<v>\d+(?:\.\d+)?)\s*/\s*(?P<den>" + str(scale_max) + r")\b"),
            ),
        ]
    elif kind == "binary":
        patterns = [
            ("label", re.compile(r"\b" + _BINARY_LABELS + _SEP + _BIN_VALUE, re.I)),
            ("brackets", re.compile(r"\[\[\s*" + _BIN_VALUE + r"\s*\]\]", re.I)),
        ]
    else:
        patterns = [
            ("label", re.compile(r"\b" + _PAIR_LABELS + _SEP + _PAIR_VALUE, re.I)),
            ("brackets", re.compile(r"\[\[\s*(?P<v>[a-z]+)\s*\]\]", re.I)),
        ]
    for name, pattern in patterns:
        for m in pattern.finditer(text):
            den = m.groupdict().get("den")
            found.append((m.start("v"), m.start("v"), m.end("v"), name, m.group("v"), den))
    return found


def parse_verdict(
    text: str, kind: str = "score", *, scale: tuple[int, int] = (1, 10), allow_tie: bool = True
) -> Verdict:
    """The last verdict in ``text``.

    Args:
        text: The judge's output.
        kind: ``"score"`` (a number on ``scale``), ``"binary"`` (yes/no) or ``"pairwise"`` (A/B/tie).
        scale: Inclusive score range; ``"7/10"`` must use the scale's maximum as denominator.
        allow_tie: Pairwise only: accept a tie (``tie``, ``[[C]]``) as a verdict.

    Raises:
        VerdictError: No verdict, or the last one is malformed.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown verdict kind {kind!r} (known: {', '.join(KINDS)})")
    if not text or not text.strip():
        raise VerdictError("empty output")
    lo, hi = scale
    candidates = _candidates(text, kind, hi)
    if not candidates:
        raise VerdictError(f"no {kind} verdict found")
    # The last verdict wins; at one position the more specific form (boxed, label) is preferred.
    rank = {"boxed": 3, "label": 2, "brackets": 1, "fraction": 0}
    order, start, end, pattern, raw, den = max(candidates, key=lambda c: (c[0], rank[c[3]]))
    value_text = raw.strip().lower()
    value_text = re.sub(r"\s+", " ", value_text)
    if kind == "score":
        if value_text in _WORDS:
            value: Any = float(_WORDS[value_text])
        else:
            try:
                value = float(value_text)
            except ValueError:
                raise VerdictError(f"not a score: {raw.strip()[:40]!r}") from None
        if den is not None and int(den) != hi:
            raise VerdictError(f"score {raw.strip()}/{den} is not on the 1-{hi} scale")
        if not lo <= value <= hi:
            raise VerdictError(f"score {value:g} is outside {lo}-{hi}")
    elif kind == "binary":
        if value_text in _YES:
            value = "yes"
        elif value_text in _NO:
            value = "no"
        else:
            raise VerdictError(f"not a yes/no verdict: {raw.strip()[:40]!r}")
    else:
        v = value_text.strip("()[] ")
        if v in ("a", "1"):
            value = "A"
        elif v in ("b", "2"):
            value = "B"
        elif v in _TIE and allow_tie:
            value = "tie"
        else:
            raise VerdictError(f"not an A/B verdict: {raw.strip()[:40]!r}")
    return Verdict(kind=kind, value=value, start=start, end=end, pattern=pattern, raw=text[start:end])


def try_parse_verdict(text: str, kind: str = "score", **kwargs: Any) -> tuple[Verdict | None, str | None]:
    """``(verdict, None)`` or ``(None, reason)``; never raises for bad text."""
    try:
        return parse_verdict(text, kind, **kwargs), None
    except VerdictError as exc:
        return None, str(exc)


__all__ = ["KINDS", "Verdict", "VerdictError", "parse_verdict", "try_parse_verdict"]
