"""Answer extraction: find the final answer inside a completion (or a gold solution).

Each extractor returns the answer text or ``None``; :func:`extract_answer` runs a chain of them and reports
which one found the answer, so ``details`` can say where the answer came from. The extractors are plain
regular expressions plus a brace matcher for ``\\boxed{...}``: cheap, and nothing here can hang (no nested
quantifiers), so a pathological completion costs linear time before any sympy is involved.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

# ``\boxed{...}``, ``\boxed {...}``, ``\fbox{...}``; the content is brace-matched by hand (regex can't nest).
_BOXED_START = re.compile(r"\\(?:boxed|fbox)\s*\{")
# ``\boxed 5`` (no braces): the answer runs to the next space, ``$`` or end.
_BOXED_BARE = re.compile(r"\\boxed\s+([^\s${}]+)")
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_GSM8K = re.compile(r"####\s*([^\n]*)")
# "The answer is 5", "Final answer: 5", "**Answer:** 5", "the final answer is $\frac12$".
_ANSWER_IS = re.compile(
    r"(?:final\s+answer|(?<![a-z])answer)\s*(?:\*\*)?\s*(?:is|:|=)\s*(?:\*\*)?\s*:?[ \t]*",
    re.IGNORECASE,
)
# Inline / display math environments; the last one is the fallback answer of a LaTeX-heavy solution.
_MATH_ENV = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
# Numbers: thousands-separated, decimals, simple fractions, scientific notation, optional percent sign.
_NUMBER = re.compile(
    r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\.\d+)(?:\s*/\s*\d+)?\s*(?:\\?%)?"
)
# The end of a sentence: a period not inside a number ("3.5" keeps its point), or a newline.
_SENTENCE_END = re.compile(r"\.(?!\d)|\n")


def _closing_braces(text: str) -> dict[int, int]:
    """Maps the index of every ``{`` that gets closed to the index of its ``}``, in one pass (linear time:
    a completion of thousands of unclosed ``\\boxed{`` must not cost quadratic time)."""
    closes: dict[int, int] = {}
    stack: list[int] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] in "{}":
            i += 2  # an escaped brace (``\\{``) is content, not structure
            continue
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            closes[stack.pop()] = i
        i += 1
    return closes


def extract_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{}`` / ``\\fbox{}`` (a truncated last box falls back to the one before)."""
    starts = [m.end() - 1 for m in _BOXED_START.finditer(text)]
    bare = list(_BOXED_BARE.finditer(text))
    if starts:
        closes = _closing_braces(text)
        for open_index in reversed(starts):
            close = closes.get(open_index)
            if close is not None:
                if bare and bare[-1].start() > open_index:
                    return bare[-1].group(1)
                return text[open_index + 1 : close].strip()
    if bare:
        return bare[-1].group(1)
    return None


def extract_answer_tag(text: str) -> str | None:
    """Content of the last ``<answer>...</answer>``; a ``\\boxed{}`` inside wins over the surrounding words."""
    matches = _ANSWER_TAG.findall(text)
    if not matches:
        return None
    inner = matches[-1].strip()
    boxed = extract_boxed(inner)
    if boxed is not None:
        return boxed
    return inner or None


def extract_gsm8k(text: str) -> str | None:
    """The text after the last ``#### `` marker (GSM8K's answer line)."""
    matches = _GSM8K.findall(text)
    if not matches:
        return None
    answer = matches[-1].strip()
    return answer or None


def _cut_sentence(answer: str) -> str:
    """The answer phrase up to the end of its sentence, keeping ``$...$`` math whole."""
    answer = answer.strip()
    if answer.startswith("$"):
        match = _MATH_ENV.match(answer)
        if match:
            return match.group(0)
    if answer.startswith("\\(") or answer.startswith("\\["):
        match = _MATH_ENV.match(answer)
        if match:
            return match.group(0)
    # A period inside a $...$ is never a sentence end; cut only outside math.
    out = []
    in_math = False
    for i, ch in enumerate(answer):
        if ch == "$":
            in_math = not in_math
        elif not in_math and _SENTENCE_END.match(answer, i):
            break
        out.append(ch)
    return "".join(out).strip()


def extract_answer_is(text: str) -> str | None:
    """The phrase after the last "the answer is" / "final answer:" / "Answer:"."""
    # Anchors only (not anchor + rest of line), so "the answer is 1? No, the answer is 2" finds both.
    matches = list(_ANSWER_IS.finditer(text))
    for match in reversed(matches):
        line_end = text.find("\n", match.end())
        rest = text[match.end() : line_end if line_end >= 0 else len(text)]
        answer = _cut_sentence(rest)
        if answer:
            return answer
    return None


def extract_last_math(text: str) -> str | None:
    """Content of the last ``$...$``, ``$$...$$``, ``\\(...\\)`` or ``\\[...\\]``."""
    last = None
    for match in _MATH_ENV.finditer(text):
        last = match
    if last is None:
        return None
    content = next(g for g in last.groups() if g is not None).strip()
    return content or None


def extract_last_number(text: str) -> str | None:
    """The last number in the text (``1,234.5``, ``-3``, ``2/3``, ``1.5e3``, ``45%``)."""
    last = None
    for match in _NUMBER.finditer(text):
        last = match
    return last.group(0).strip() if last else None


EXTRACTORS: dict[str, Callable[[str], str | None]] = {
    "answer_tag": extract_answer_tag,
    "boxed": extract_boxed,
    "gsm8k": extract_gsm8k,
    "answer_is": extract_answer_is,
    "last_math": extract_last_math,
    "last_number": extract_last_number,
}

# Extraction modes: the chain of extractors tried in order. "strict" is boxed-only (for RL: no credit for an
# answer the model did not mark); "auto" tries the explicit markers first and falls back to the last number.
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


def extract_answer(text: str, chain: Sequence[str]) -> tuple[str | None, str | None]:
    """Runs the extractors of ``chain`` in order: (answer, name of the extractor that found it)."""
    for name in chain:
        answer = EXTRACTORS[name](text)
        if answer is not None and answer.strip():
            return answer.strip(), name
    return None, None
