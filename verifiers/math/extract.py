"""Answer extraction: find the final answer inside a completion (or a gold solution).

Each extractor returns the answer text or ``None``; the ``*_span`` functions also say where in the text the
answer is, which the reader (:mod:`.answer`: which answer counts, and when a completion is ambiguous) needs. Everything here is plain regular expressions without
nested quantifiers plus one linear brace-matching pass, under length bounds where a regex looks around, so a
pathological completion (100k characters of ``\\boxed{``) costs linear time before any sympy is involved.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# ``\boxed{...}``, ``\boxed {...}``, ``\fbox{...}`` (content brace-matched by hand: regex can't nest), and
# ``\boxed 5`` (no braces: the answer runs to the next space, ``$`` or brace).
_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])\s*")
_BARE_BOX_CONTENT = re.compile(r"[^\s${}]+")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_GSM8K = re.compile(r"####[ \t]*([^\n]*)")
# "The answer is 5", "Final answer: 5", "**Answer:** 5", "the final answer is $\frac12$".
_ANSWER_IS = re.compile(
    r"(?:final\s+answer|(?<![a-z])answer)\s*(?:\*\*)?\s*(?:is|:|=)\s*(?:\*\*)?\s*:?[ \t]*",
    re.IGNORECASE,
)
# Inline / display math. Inline ``$...$`` and ``\(...\)`` stay on one line (a ``$`` left open on one line
# must not pair with a currency sign lines later); an escaped ``\$`` inside is content, not a delimiter.
_MATH_ENV = re.compile(
    r"(?<!\\)\$\$(.+?)(?<!\\)\$\$"
    r"|(?<![\\$])\$(?!\$)((?:\\.|[^$\\\n])+?)\$"
    r"|\\\(((?:[^\\\n]|\\(?!\)))+?)\\\)"
    r"|\\\[(.+?)\\\]",
    re.DOTALL,
)
# Numbers: thousands-separated (``1,000``, ``1{,}000``, MATH's ``1,\!000``, thin space ``1\,000``, plain
# space ``1 000``), unambiguous decimal commas (``1,22``, ``0,111``, ``1000,99``), decimals, scientific
# notation, simple fractions, an optional percent sign.
_THOUSANDS_SEP = r"(?:,\\!\s?|\{,\}|\\,|,|[ \u00a0\u202f](?=\d{3}(?!\d)))"
_NUMBER = re.compile(
    r"(?<![\d.])-?(?:[1-9]\d{0,2}(?:" + _THOUSANDS_SEP + r"\d{3}(?!\d))+(?:\.\d+)?"
    r"|(?:0|\d{4,}),\d+(?![\d,])|\d{1,3},\d{2}(?![\d,])|\d{1,3},\d{4,}(?![\d,])"
    r"|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\.\d+)"
    r"(?:\s*/\s*\d+(?![\d,]|\.\d))?(?:\s*\\?%)?"
)
# Characters of a LaTeX / expression token run around a number (``x^{2}``, ``\frac{10}{9}``, ``3x``).
_RUN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789\\{}^_+-*/()[].,=!'|")
# Letters right after a number that are a unit abbreviation (``5cm``, ``1,000.99m²``), not a variable.
_UNIT_SUFFIXES = frozenset(
    {"m", "cm", "mm", "km", "kg", "g", "mg", "s", "ms", "h", "hr", "hrs", "min", "ml", "l", "ft", "yd", "mi"}
    | {"lb", "lbs", "oz", "mph", "kmh", "st", "nd", "rd", "th", "sec"}
)
# Words right after a number that change its value; the last-number extractor keeps them with the number
# so that normalisation converts them (``5 million``) or refuses the answer (``5 times 3``).
VALUE_WORDS = (
    "hundred|thousand|million|billion|trillion|dozen|gross|squared|cubed|times|plus|minus|over|divided|"
    "multiplied|more|less|fewer|halves|half|thirds|quarters|fifths|tenths|hundredths|pairs?|couples?|"
    "percent|pct|percentage"
)
_VALUE_WORD_AFTER = re.compile(r"[ \t]+((?:" + VALUE_WORDS + r")s?)\b", re.IGNORECASE)
# A number or run right before the last one, joined to it by "," / "or" / "and": a list of candidates.
_LIST_JOINER = re.compile(
    r"(?:\s*,\s*(?:(?:or|and|and/or)\s+)?|\s+(?:or|and|and/or)\s+)(?:[A-Za-z]\s*=\s*)?$", re.IGNORECASE
)
# Negation words (lower case or capitalised: ``NO`` is a segment's name): an answer phrase holding one is kept
# whole ("not 5" is not the answer 5).
NEGATION = re.compile(
    r"\b(?:[Nn](?:ot|o|ever|one|either|or)|NOT|NONE|[Cc]annot|[Cc]an't|[Ii]sn't|[Aa]ren't|[Ee]xcept|[Ee]xcluding|"
    r"[Ww]ithout)\b"
    r"|\\neq?(?![A-Za-z])|\\not(?![A-Za-z])|\\n(?:less|gtr|leq|geq|eq)(?![A-Za-z])|≠|!="
)
# Math spans listed together after an answer anchor: "$12$ and $13$", "$1$, $2$ or $3$".
_MATH_JOIN = re.compile(
    r"\s*(?:,\s*(?:and|or)?|and|or)\s*(?:\$\$.{1,200}?\$\$|\$[^$\n]{1,200}?\$|\\\(.{1,200}?\\\))",
    re.IGNORECASE,
)
# The end of a sentence: a period not inside a number ("3.5" keeps its point), or a newline.
_SENTENCE_END = re.compile(r"\.(?!\d)|\?|\n")
# What joins a number to the expression before it across one space: an operator (``3 + 5``) or a LaTeX
# command with its subscript (``\log_{2} 8``, ``\cdot 5``).
_RUN_BRIDGE = re.compile(r"(?:[+\-*/^]|\\[A-Za-z]+(?:_\{[^{}]{0,20}\}|_\w)?) $")


@dataclass(frozen=True)
class Span:
    """An answer found in a text: its content and where it is (``end`` is where the text after it starts)."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Box:
    """One ``\\boxed{}`` / ``\\fbox{}``: ``closed`` is false for a box still open at the end of the text."""

    start: int
    end: int
    content: str
    closed: bool


def brace_map(text: str) -> tuple[dict[int, int], list[int]]:
    """One linear pass over ``text``: {index of a ``{`` -> index of its ``}``}, and the ``{`` never closed.
    An escaped brace (``\\{``) is content, not structure."""
    closes: dict[int, int] = {}
    stack: list[int] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] in "{}\\":
            i += 2
            continue
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            closes[stack.pop()] = i
        i += 1
    return closes, stack


def find_boxes(text: str) -> list[Box]:
    """Every top-level box of ``text`` in order (a box inside another box is part of it). Empty boxes
    (``\\boxed{}``, as in "put your answer in \\boxed{}") are skipped; a box left open runs to the end."""
    if "box" not in text:
        return []
    closes: dict[int, int] | None = None  # built on the first braced box only
    boxes: list[Box] = []
    covered = -1
    n = len(text)
    for match in _BOX_COMMAND.finditer(text):
        if match.start() < covered:
            continue
        after = match.end()
        if after < n and text[after] == "{":
            if closes is None:
                closes = brace_map(text)[0]
            close = closes.get(after)
            if close is None:
                boxes.append(Box(match.start(), n, text[after + 1 :].strip(), False))
                break  # everything after an open box is inside it
            content = text[after + 1 : close].strip()
            covered = close + 1
            if content:
                boxes.append(Box(match.start(), close + 1, content, True))
        elif text.startswith("boxed", match.start() + 1) and after > match.start() + len("\\boxed"):
            # ``\boxed 7``: a space after the command, then the answer token
            bare = _BARE_BOX_CONTENT.match(text, after)
            if bare:
                boxes.append(Box(match.start(), bare.end(), bare.group(0), True))
                covered = bare.end()
    return boxes


_BOX_SEPARATOR = re.compile(r"\b(?:and|or)\b|,|;")
# How boxes are read (the math verifier's ``boxes`` setting): boxes listed together are one answer (``group``,
# math-verify's rule), or each box is an answer of its own and the last one counts (``last``, MATH's
# ``last_boxed_only_string``).
BOX_RULES = ("group", "last")


def group_boxes(text: str, boxes: Sequence[Box], rule: str = "group") -> list[list[Box]]:
    """Consecutive boxes that together state one answer (``\\boxed{1}, \\boxed{2}``, ``\\boxed{1} and
    \\boxed{2}``): joined when little text separates them (under 10 characters, or under 70 with "and",
    "or", "," or ";"), the rule math-verify applies to a gold answer's boxes. With ``rule="last"`` every box
    is a group of its own."""
    groups: list[list[Box]] = []
    for box in boxes:
        if not box.closed:
            continue
        if groups and rule == "group":
            prev = groups[-1][-1]
            between = text[prev.end : box.start]
            if len(between) < 10 or (
                len(between) < 70 and box.content != prev.content and _BOX_SEPARATOR.search(between)
            ):
                groups[-1].append(box)
                continue
        groups.append([box])
    return groups


def group_contents(group: Sequence[Box]) -> list[str]:
    """The distinct contents of a box group, in order."""
    seen: list[str] = []
    for box in group:
        if box.content not in seen:
            seen.append(box.content)
    return seen


def extract_boxed_span(text: str) -> Span | None:
    """The last box (``None`` when there is none or when it is truncated: no fallback to an earlier box).
    The verifier reads boxes listed together as one answer (:func:`group_boxes`)."""
    boxes = find_boxes(text)
    if not boxes or not boxes[-1].closed:
        return None
    return Span(boxes[-1].content, boxes[-1].start, boxes[-1].end)


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{}`` / ``\\fbox{}``. A truncated last box gives ``None``: it never
    falls back to an earlier, complete box."""
    span = extract_boxed_span(text)
    return span.text if span else None


def extract_answer_tag_span(text: str) -> Span | None:
    """The last ``<answer>...</answer>``; a ``\\boxed{}`` inside wins over the surrounding words."""
    last = None
    for match in _ANSWER_TAG.finditer(text):
        last = match
    if last is None:
        return None
    inner = last.group(1)
    boxes = find_boxes(inner)
    if boxes:
        box = boxes[-1]
        if not box.closed:
            return None  # cut inside its box: no answer
        offset = last.start(1)
        return Span(box.content, offset + box.start, offset + box.end)
    inner = inner.strip()
    return Span(inner, last.start(1), last.end()) if inner else None


def extract_answer_tag(text: str) -> str | None:
    """Content of the last ``<answer>...</answer>``; a ``\\boxed{}`` inside wins over the surrounding words."""
    span = extract_answer_tag_span(text)
    return span.text if span else None


def gsm8k_spans(text: str) -> list[Span]:
    """Every non-empty ``#### `` line (GSM8K's answer line)."""
    out = []
    for match in _GSM8K.finditer(text):
        answer = match.group(1).strip()
        if answer:
            out.append(Span(answer, match.start(), match.end()))
    return out


def extract_gsm8k(text: str) -> str | None:
    """The text after the last ``#### `` marker (GSM8K's answer line)."""
    spans = gsm8k_spans(text)
    return spans[-1].text if spans else None


_PHRASE_LEAD = re.compile(r"(?:[\s\"'“”*]|\\\")*")


def _cut_sentence(answer: str) -> str:
    """The answer phrase up to the end of its sentence, keeping ``$...$`` math whole (``answer`` starts
    with the phrase: leading spaces, quotes and bold markers are removed by the caller)."""
    stripped = answer.rstrip()
    if stripped.startswith(("$", "\\(", "\\[")):
        match = _MATH_ENV.match(stripped)
        if match:
            # "$12$ and $13$": math spans listed together are one answer
            end = match.end()
            for _ in range(5):
                joined = _MATH_JOIN.match(stripped, end)
                if joined is None:
                    break
                end = joined.end()
            return stripped[:end]
    answer = stripped
    out = []
    in_math = False
    i = 0
    while i < len(answer):
        ch = answer[i]
        if ch == "\\" and i + 1 < len(answer) and answer[i + 1] == "$":
            out.append(answer[i : i + 2])
            i += 2
            continue
        if ch == "$":
            in_math = not in_math
        elif not in_math and _SENTENCE_END.match(answer, i):
            break
        out.append(ch)
        i += 1
    return "".join(out).rstrip().rstrip("\"'“”*").removesuffix("\\").rstrip()


# A phrase that starts like a value (a number, math, a bracket, a single letter or a LaTeX command) is the
# answer itself ("3.75 dollars", "$\frac34$", "x = 5", "(B)"); one that starts with a word is a sentence
# ("The largest $n$ is 34") whose last value is the answer.
_VALUE_START = re.compile(r"[-+\d.$\\({\[]|[A-Za-z](?![A-Za-z])")
_HAS_VALUE = re.compile(r"\d|\$|\\\(|\\\[")


def _phrase_value(phrase: str) -> tuple[str, int, int] | None:
    """(answer, start, end) inside an answer-is phrase."""
    if _VALUE_START.match(phrase) or not _HAS_VALUE.search(phrase) or NEGATION.search(phrase):
        return phrase, 0, len(phrase)
    inner = extract_last_value_span(phrase)
    if inner is None:
        return phrase, 0, len(phrase)
    return inner.text, inner.start, inner.end


def answer_is_spans(text: str) -> list[Span]:
    """Every "the answer is ..." / "final answer: ..." / "Answer: ..." phrase with a non-empty answer."""
    out = []
    # Anchors only (not anchor + rest of line), so "the answer is 1? No, the answer is 2" finds both.
    for match in _ANSWER_IS.finditer(text):
        line_end = text.find("\n", match.end())
        rest = text[match.end() : line_end if line_end >= 0 else len(text)]
        lead = _PHRASE_LEAD.match(rest).end()
        offset = match.end() + lead
        phrase = _cut_sentence(rest[lead:])
        if not phrase:
            continue
        value = _phrase_value(phrase)
        if value is None or not value[0].strip():
            continue
        answer, start, end = value
        out.append(Span(answer.strip(), offset + start, offset + end))
    return out


def extract_answer_is_span(text: str) -> Span | None:
    spans = answer_is_spans(text)
    return spans[-1] if spans else None


def extract_answer_is(text: str) -> str | None:
    """The answer after the last "the answer is" / "final answer:" / "Answer:" (the number or math in the
    sentence when the phrase is a sentence: "Final Answer: The largest $n$ is 34." gives 34)."""
    span = extract_answer_is_span(text)
    return span.text if span else None


def extract_last_math_span(text: str) -> Span | None:
    last = None
    for match in _MATH_ENV.finditer(text):
        last = match
    if last is None:
        return None
    content = next(g for g in last.groups() if g is not None).strip()
    return Span(content, last.start(), last.end()) if content else None


def extract_last_math(text: str) -> str | None:
    """Content of the last ``$...$``, ``$$...$$``, ``\\(...\\)`` or ``\\[...\\]``."""
    span = extract_last_math_span(text)
    return span.text if span else None


def _token_run(text: str, start: int, end: int) -> tuple[int, int]:
    """The run of expression characters around ``text[start:end]`` (spaces only after an operator or a LaTeX
    command), bounded to 200 characters."""
    left, right = start, end
    while left > 0 and start - left < 200:
        if text[left - 1] in _RUN_CHARS:
            left -= 1
            continue
        bridge = _RUN_BRIDGE.search(text, max(0, left - 40), left)
        if bridge is None or bridge.start() == left:
            break
        left = bridge.start()
    while right < len(text) and right - end < 200 and text[right] in _RUN_CHARS:
        right += 1
    # sentence punctuation and unbalanced brackets at the edges are not part of the expression
    while right > end and text[right - 1] in ".,;:!?":
        right -= 1
    run = text[left:right]
    while run and run[0] in "([" and run.count("(") + run.count("[") > run.count(")") + run.count("]"):
        left += 1
        run = run[1:]
    while run and run[-1] in ")]" and run.count("(") + run.count("[") < run.count(")") + run.count("]"):
        right -= 1
        run = run[:-1]
    return left, right


def _bare_value_at(text: str, match: re.Match) -> Span:
    """The value a number match stands for: the number (with a value-changing word after it), or the LaTeX
    / expression token it is part of (``x^{2}``, ``\\frac{10}{9}``, ``3x``: never its exponent, denominator
    or coefficient alone)."""
    start, end = match.start(), match.end()
    number = match.group(0).rstrip()
    end = start + len(number)
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    left, right = _token_run(text, start, end)
    run = text[left:right]
    letters_after = re.match(r"[A-Za-z]+", text[end : end + 8])
    unit_after = letters_after is not None and letters_after.group(0) in _UNIT_SUFFIXES
    in_expression = (
        any(c in run for c in "\\^_{} ") or before.isalpha() or (after.isalpha() and not unit_after)
    )
    if in_expression and run:
        return Span(run, left, right)
    word = _VALUE_WORD_AFTER.match(text, end)
    if word and word.end() - end < 40:
        return Span(text[start : word.end()], start, word.end())
    return Span(number, start, end)


def extract_last_number_span(text: str) -> Span | None:
    last = None
    for match in _NUMBER.finditer(text):
        last = match
    if last is None:
        return None
    value = _bare_value_at(text, last)
    # Numbers listed right before it ("4 or 5", "3, 4, or 5"): the answer is the whole list (a hedge).
    start = value.start
    for _ in range(50):
        joiner = _LIST_JOINER.search(text, max(0, start - 20), start)
        if joiner is None or joiner.start() == start:
            break
        previous = None
        for match in _NUMBER.finditer(text, max(0, joiner.start() - 60), joiner.start()):
            previous = match
        if previous is None or previous.end() != joiner.start():
            break
        start = _bare_value_at(text, previous).start
    if start != value.start:
        return Span(text[start : value.end], start, value.end)
    return value


def extract_last_number(text: str) -> str | None:
    """The last number in the text (``1,234.5``, ``-3``, ``2/3``, ``1.5e3``, ``45%``); when it sits inside a
    LaTeX or algebraic token (``x^{2}``, ``\\frac{10}{9}``, ``3x``) the whole token, never a piece of it."""
    span = extract_last_number_span(text)
    return span.text if span else None


def extract_last_value_span(text: str) -> Span | None:
    """The later of the last math span and the last number (a final number after an earlier ``$...$`` wins)."""
    math_span = extract_last_math_span(text)
    number_span = extract_last_number_span(text)
    if math_span is None or (number_span is not None and number_span.start >= math_span.end):
        return number_span
    return math_span


EXTRACTORS: dict[str, Callable[[str], str | None]] = {
    "answer_tag": extract_answer_tag,
    "boxed": extract_boxed,
    "gsm8k": extract_gsm8k,
    "answer_is": extract_answer_is,
    "last_math": extract_last_math,
    "last_number": extract_last_number,
}

# Extraction modes: the chain of extractors tried in order. "strict" is boxed-only (for RL: no credit for an
# answer the model did not mark); "auto" tries the explicit markers first and falls back to the last value
# (the later of the last math span and the last number).
MODES: dict[str, tuple[str, ...]] = {
    "auto": ("answer_tag", "boxed", "gsm8k", "answer_is", "last_math", "last_number"),
    "strict": ("boxed",),
    "boxed": ("boxed",),
    "answer_is": ("answer_is",),
    "gsm8k": ("gsm8k",),
    "last_number": ("last_number",),
    "answer_tag": ("answer_tag",),
}


def resolve_mode(mode: str | Sequence[str]) -> tuple[str, ...]:
    """The extractor chain of a mode name, or of an explicit sequence of extractor names."""
    if isinstance(mode, str):
        if mode not in MODES:
            raise ValueError(f"unknown extraction mode {mode!r} (known: {', '.join(MODES)})")
        return MODES[mode]
    chain = tuple(mode)
    unknown = [name for name in chain if name not in EXTRACTORS]
    if unknown or not chain:
        raise ValueError(f"unknown extractors {unknown} (known: {', '.join(EXTRACTORS)})")
    return chain
