"""Reading the letter a multiple-choice response commits to, and refusing what does not commit to one.

The response is read as a sequence of *statements*, each a place where it states an answer:

- ``answer_is``: an answer cue ("the answer is", "Answer:", "**Answer:**", "the correct option would be",
  "the closest answer from the options is") and what follows it on its line (the next line when the cue
  ends its line: "The correct answer is:\\n\\nF. ...");
- ``is_answer``: a letter named before "is the (correct) answer/option/choice" ("Option B is the correct
  answer");
- ``boxed``: a ``\\boxed{}`` outside any answer cue's statement;
- ``last_line_letter`` / ``option_text``: a last line that is only a letter ("(B)", "B.", "**B**"), only an
  option's text, or an option's letter and its exact text, when no other statement is on it.

The **last** statement is the response's answer (a statement can be superseded, so the last one wins). It
names one letter, or it is refused with a reason: two different letters ("(A) or (B)", "A/B", "both A and
C"), a negation ("the answer is not (A)"), a letter whose following text is another option's, or no letter
at all. An answer cue's statement that names no letter is read as an option's text when it equals one
(normalised, the whole statement: a text merely inside a sentence is not an answer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rewardlab.verifiers.choice.options import Choices, normalize_text


@dataclass(frozen=True)
class Statement:
    """One stated answer: where it is (``[start, end)`` in the read text), how it was read, and the letter
    it names, or ``reason``: why it names no one letter."""

    start: int
    end: int
    method: str
    letter: str | None = None
    reason: str | None = None


# ---------------------------------------------------------------------------------------------- patterns
_VERB = r"(?:(?i:\b(?:is|was|would\s+be|will\s+be|should\s+be|must\s+be)\b)|[=:])"
_GAP = r"[^\S\n]*(?:\*\*|__)?[^\S\n]*"
_WORDS = r"(?:[^\S\n]+(?!(?i:that|which|who|we|it|you|this)\b)[a-z][a-z-]+){0,4}?"
_ANSWER_CUE = re.compile(
    r"(?P<answer>(?i:\banswer\b)" + _WORDS + _GAP + _VERB + r"(?::(?!\S))?)"
    r"|(?P<option>(?i:\b(?:correct|best|right|final|closest|most\s+[a-z]+)\s+(?:option|choice)\b)"
    + _WORDS
    + _GAP
    + _VERB
    + r"(?::(?!\S))?)"
    r"|(?P<noun>(?i:\b(?:correct|best|right|closest|most\s+(?:accurate|appropriate|likely|suitable))"
    r"\s+(?:definition|description|explanation|match|fit|statement|approximation|response|conclusion))"
    + _WORDS
    + _GAP
    + _VERB
    + r"(?::(?!\S))?)"
)
"""An answer cue; the answer follows it: "answer ... is", a qualified "option"/"choice", or a qualified noun
("the best definition among the options is (E)"; read only when a letter follows). Words between the noun
and the verb are lowercase words of two letters or more, so an option letter is never swallowed ("answer
from the options is (C)")."""

_QUALIFIED = re.compile(
    r"(?i:\b(?:the|my|final|correct|best|right|true|closest))[^\S\n]+(?:[a-z]+[^\S\n]+)?$"
)
"""Words before "answer" that make a cue a statement of the answer."""
_OPEN = (
    r"(?:[^\S\n]|\*|_|`|\$|\\\(|\\\[|\\boxed\s*\{|\\text(?:bf|it)?\s*\{|\\math(?:rm|bf)\s*\{|\{|\(|\["
    r"|(?i:option|choice|letter|(?:closest|nearest)\s+to)\b[^\S\n]*)*"
)
"""What may wrap a letter before it: spaces, markdown, LaTeX delimiters and boxes, "option"."""
_LETTER = re.compile(_OPEN + r"(?P<letter>[A-Z])(?![A-Za-z0-9'’])")
_WRAPPED = re.compile(r"[*_`$(\[{]|\\|(?i:option|choice|letter)")
_CLOSE = re.compile(r"[^\S\n]*(?:[)\]}*_`$]|\\\)|\\\])*")
_CONNECTOR = re.compile(
    r"[^\S\n]*(?:,|/|&|\+|\\lor|\\text\{\s*(?:or|and)\s*\}|(?i:\bor\b|\band\b|\band/or\b))[^\S\n]*"
)
_BARE_FOLLOWERS = frozenset(
    [
        "because",
        "since",
        "as",
        "which",
        "with",
        "or",
        "and",
        "is",
        "here",
        "for",
        "in",
        "given",
        "due",
        "-",
        "—",
        "–",
    ]
)
"""Lowercase words after which a bare capital letter still reads as a letter ("A because ..."); after any
other ("A combination of", "I think") it is a word of the sentence."""
_NEGATED = re.compile(r"[\s:*_]*(?i:not|neither|none\s+of\s+(?:the|these))\b")
_SEVERAL = re.compile(r"[\s:*_]*(?i:both|either|all\s+of|any\s+of|a\s+combination\s+of)\b")
_EXPLICIT_OTHER = re.compile(
    r"(?<!\w)\((?P<p>[A-Z])\)|\\boxed\s*\{[^{}A-Za-z]*(?:\\text\{)?(?P<b>[A-Z])\b"
    r"|\b(?i:option|choice)\s+\(?(?P<o>[A-Z])\b(?!')|(?<![\w.])(?P<d>[A-Z])\.\s"
)
"""A letter in a form that names an option, in the rest of a statement (another letter there is a hedge)."""
_NOT_BEFORE = re.compile(r"(?i:\bnot|\brather\s+than|\binstead\s+of|\bunlike|\bexcept|\bover)\W*$")
_IS_ANSWER = re.compile(
    r"(?P<pre>(?<![\w.])\(?[A-Z]\)?" + _CONNECTOR.pattern + r")?"
    r"(?:(?i:\boption|\bchoice)[^\S\n]+)?(?:\*\*)?(?<![\w.])\(?(?P<letter>[A-Z])\)?(?:\*\*)?[^\S\n]+"
    r"(?i:is|would\s+be)[^\S\n]+(?i:the[^\S\n]+)?(?:(?i:correct|best|right|final|most\s+[a-z]+)[^\S\n]+)?"
    r"(?i:answer|option|choice)\b"
)
_BOX = re.compile(r"\\boxed\s*\{")
_BOX_WRAPPERS = re.compile(r"\\(?:text(?:bf|it)?|math(?:rm|bf))\s*\{([^{}]*)\}")
_LINE = re.compile(r"[^\n]+")
_LETTER_ONLY = re.compile(r"[\s*_#>`$]*(?:\\boxed\s*\{)?[(\[]?(?P<letter>[A-Z])[)\].:]?[\s*_}`$]*")
_LETTERS_ONLY = re.compile(
    r"[\s*_#>`$]*(?:[(\[]?[A-Z][)\].]?[^\S\n]*(?:,|/|&|(?i:or|and))[^\S\n]*)+[(\[]?[A-Z][)\].]?[\s*_`$.]*"
)
_LETTER_TEXT = re.compile(r"[\s*_#>-]*[(\[]?(?P<letter>[A-Z])(?:[)\].:]|\s+-)\s*(?P<text>.+)")
_SEPARATOR = re.compile(r"^[\s.:)\]}*]*(?:[-—–]\s+)?")
"""What separates a letter from its option's text ("B. ", "(B) - "); a minus glued to a number stays."""
_SENTENCE_END = re.compile(r"(?<=[^\s.A-Z])\.(?:\s|$)|[;!?](?:\s|$)")


# ---------------------------------------------------------------------------------------- entry point
def read_statements(text: str, choices: Choices, *, last_line: bool, option_text: bool) -> list[Statement]:
    """Every statement of an answer in ``text``, in order of position."""
    use_texts = option_text and bool(choices.normalized)
    cues = list(_ANSWER_CUE.finditer(text))
    read = [_cue_statement(text, cue, nxt, choices, use_texts) for cue, nxt in _pairs(cues)]
    statements = [s for (s, _), cue in zip(read, cues, strict=True) if s.letter or _committing(text, cue)]
    cue_spans = [(cue.start(), tail_end) for cue, (_, tail_end) in zip(cues, read, strict=True)]
    for match in _IS_ANSWER.finditer(text):
        if not _inside(match.start("letter"), cue_spans):
            statements.append(_is_answer_statement(match))
    for box in _BOX.finditer(text):
        if not _inside(box.start(), cue_spans):
            statements.append(_box_statement(text, box, choices, use_texts))
    if last_line:
        taken = cue_spans + [(s.start, s.end) for s in statements]
        final_line = _last_line_statement(text, choices, use_texts, taken)
        if final_line is not None:
            statements.append(final_line)
    return sorted(statements, key=lambda s: (s.start, s.end))


def _committing(text: str, cue: re.Match[str]) -> bool:
    """Whether a cue states *the* answer ("the answer is", "Final answer:", "Answer:"), so that naming no
    letter after it is a refusal; a letterless "this answer is slightly higher" is prose, and is skipped."""
    if cue.group("noun"):
        return False
    return (
        cue.group().rstrip().endswith(":")
        or _QUALIFIED.search(text, max(0, cue.start() - 24), cue.start()) is not None
    )


def _pairs(cues: list[re.Match[str]]) -> list[tuple[re.Match[str], int | None]]:
    """Each cue with the start of the next one (a statement ends where the next begins)."""
    return [(cue, cues[i + 1].start() if i + 1 < len(cues) else None) for i, cue in enumerate(cues)]


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= position < end for start, end in spans)


# ------------------------------------------------------------------------------------ answer cues
def _cue_statement(
    text: str, cue: re.Match[str], next_cue: int | None, choices: Choices, use_texts: bool
) -> tuple[Statement, int]:
    """The statement after an answer cue, and where its words end."""
    start = cue.end()
    line_end = text.find("\n", start)
    end = len(text) if line_end < 0 else line_end
    if next_cue is not None:
        end = min(end, next_cue)
    if not text[start:end].strip(" \t:*_#`"):  # the cue ends its line: the answer is on the next one
        following = _LINE.search(text, end)
        while following is not None and not following.group().strip():
            following = _LINE.search(text, following.end())
        if following is not None and (next_cue is None or following.start() < next_cue):
            start, end = following.start(), following.end()
            if next_cue is not None:
                end = min(end, next_cue)
    return read_tail(text, start, end, choices, use_texts, method="answer_is"), end


def read_tail(
    text: str, start: int, end: int, choices: Choices, use_texts: bool, *, method: str
) -> Statement:
    """The statement in ``text[start:end]``, the words after an answer cue (or inside a box)."""
    tail = text[start:end]
    if use_texts:
        letter = choices.letter_of_text(_first_sentence(tail))
        if letter is not None:
            offset = len(tail) - len(tail.lstrip(" \t:*_`$"))
            return Statement(start + offset, start + len(tail.rstrip()), "option_text", letter)
    if _NEGATED.match(tail):
        return Statement(start, end, method, reason="the final statement is negated")
    if _SEVERAL.match(tail):
        return Statement(start, end, method, reason="the final statement names several options")
    found = _LETTER.match(tail)
    if found is None or not _reads_as_letter(tail, found):
        return Statement(start, end, method, reason="the final statement names no option letter")
    letter = found.group("letter")
    rest_at = found.end() + _CLOSE.match(tail, found.end()).end() - found.end()
    span = (start + found.start("letter"), start + found.end("letter"))
    problem = _hedge(tail, rest_at, letter, choices)
    return Statement(*span, method, letter=letter if problem is None else None, reason=problem)


def _first_sentence(tail: str) -> str:
    cut = _SENTENCE_END.search(tail)
    return tail[: cut.start()] if cut else tail


def _reads_as_letter(tail: str, found: re.Match[str]) -> bool:
    """A bare capital followed by a lowercase word is a word ("A combination", "I think"), unless the word
    is one that follows an answer ("A because ...")."""
    if _WRAPPED.search(tail[found.start() : found.start("letter")]):
        return True
    after = tail[found.end() :]
    if not after.startswith((" ", "\t")):
        return True
    word = after.split(None, 1)[0] if after.strip() else ""
    return not word[:1].islower() or word in _BARE_FOLLOWERS


def _hedge(tail: str, rest_at: int, letter: str, choices: Choices) -> str | None:
    """Why the rest of a statement makes its letter not the one answer, or ``None``."""
    joined = _CONNECTOR.match(tail, rest_at)
    if joined is not None and joined.end() > rest_at:
        other = _LETTER.match(tail, joined.end())
        if other is not None and other.group("letter") != letter:
            return f"the final statement names two options ({letter} and {other.group('letter')})"
    rest = _first_sentence(_strip_own_text(tail[rest_at:], letter, choices))
    if choices.normalized:
        named = choices.letter_of_text(_SEPARATOR.sub("", _first_sentence(rest), count=1))
        if named is not None and named != letter:
            return f"the final statement names letter {letter} with the text of option {named}"
    for match in _EXPLICIT_OTHER.finditer(rest):
        other = next(g for g in match.groups() if g)
        if other != letter and not _NOT_BEFORE.search(rest[max(0, match.start() - 20) : match.start()]):
            return f"the final statement names two options ({letter} and {other})"
    return None


def _strip_own_text(rest: str, letter: str, choices: Choices) -> str:
    """The rest of a statement without the option's own text after its letter ("(D) Both (A) and (B)")."""
    own = choices.texts.get(letter)
    if not own:
        return rest
    body = _SEPARATOR.sub("", rest, count=1)
    if normalize_text(body[: len(own) + 8]).startswith(normalize_text(own)):
        return body[len(own) :]
    return rest


# ------------------------------------------------------------------------------- letter before the cue
def _is_answer_statement(match: re.Match[str]) -> Statement:
    letter = match.group("letter")
    span = (match.start("letter"), match.end("letter"))
    pre = match.group("pre")
    if pre:
        first = re.search(r"[A-Z]", pre).group()
        if first != letter:
            return Statement(
                *span, "is_answer", reason=f"the final statement names two options ({first} and {letter})"
            )
    return Statement(*span, "is_answer", letter=letter)


# -------------------------------------------------------------------------------------------- boxes
def _box_statement(text: str, box: re.Match[str], choices: Choices, use_texts: bool) -> Statement:
    depth, position = 1, box.end()
    while position < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[position], 0)
        position += 1
    if depth:
        return Statement(box.start(), len(text), "boxed", reason="the box is not closed")
    content_end = position - 1
    inner = _BOX_WRAPPERS.sub(lambda m: m.group(1), text[box.end() : content_end])
    if inner != text[box.end() : content_end]:  # read the unwrapped content on its own, with box offsets
        statement = read_tail(inner, 0, len(inner), choices, use_texts, method="boxed")
        return Statement(box.end(), content_end, statement.method, statement.letter, statement.reason)
    statement = read_tail(text, box.end(), content_end, choices, use_texts, method="boxed")
    if statement.letter is None and statement.reason == "the final statement names no option letter":
        return Statement(statement.start, statement.end, "boxed", reason="the box names no option letter")
    return statement


# ---------------------------------------------------------------------------------------- last line
def _last_line_statement(
    text: str, choices: Choices, use_texts: bool, taken: list[tuple[int, int]]
) -> Statement | None:
    lines = [m for m in _LINE.finditer(text) if m.group().strip()]
    if not lines:
        return None
    line = lines[-1]
    if any(start < line.end() and line.start() < end for start, end in taken):
        return None  # a statement on the last line already reads it
    only = _LETTER_ONLY.fullmatch(line.group())
    if only is not None:
        return Statement(
            line.start() + only.start("letter"),
            line.start() + only.end("letter"),
            "last_line_letter",
            only.group("letter"),
        )
    several = _LETTERS_ONLY.fullmatch(line.group())
    if several is not None and len(set(re.findall(r"[A-Z]", line.group()))) > 1:
        span = (line.start() + len(line.group()) - len(line.group().lstrip()), line.end())
        return Statement(*span, "last_line_letter", reason="the last line names several options")
    if not use_texts:
        return None
    previous = lines[-2].group() if len(lines) > 1 else ""
    in_a_list = _names_option(previous, choices)
    span = (line.start() + len(line.group()) - len(line.group().lstrip()), line.end())
    letter = choices.letter_of_text(line.group())
    if letter is None:
        lettered = _LETTER_TEXT.fullmatch(line.group())
        if lettered is None or choices.letter_of_text(lettered.group("text")) != lettered.group("letter"):
            return None
        letter = lettered.group("letter")
    if in_a_list:
        return Statement(*span, "option_text", reason="the last lines list the options: no option is chosen")
    return Statement(*span, "option_text", letter)


def _names_option(line: str, choices: Choices) -> bool:
    """Whether a line is one entry of an option list (an option's text, with or without its letter)."""
    if choices.letter_of_text(line) is not None:
        return True
    lettered = _LETTER_TEXT.fullmatch(line)
    return lettered is not None and choices.letter_of_text(lettered.group("text")) is not None
