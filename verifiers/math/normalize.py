"""Answer normalisation and the plain-number fast path.

math-verify's parser is good at LaTeX but costs milliseconds per call (sympy), and a few surface forms
common in model outputs trip it (``1.5e3`` becomes ``1.5*E*3``, ``5 dollars`` becomes a product of
symbols, ``\\text{5 apples}``...). Here an extracted answer is cleaned up first (wrappers, units,
degrees, currency, thousands separators, ``x = ...``), and answers that are then plain numbers are compared
exactly with :class:`fractions.Fraction`, without sympy; everything else goes to math-verify.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("**", "**"))
_TEXT_CMD = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_SPACING = re.compile(r"\\[,;:!> ]|\\q?quad|~")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree|\s*\bdegrees?\b")
_LEFT_RIGHT = re.compile(r"\\(?:left|right)\s*(?=[()\[\]|.]|\\[{}|])")
_FRAC_STYLE = re.compile(r"\\[dt]frac")
_THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_SPACE_THOUSANDS = re.compile(r"^-?\d{1,3}(?:(?:\\,|\s|\{,\}|,)\d{3})+(?:\.\d+)?$")
_CURRENCY = re.compile(r"^(?:\\\$|\$|USD\s*|€|£|\\pounds\s*|\\euro\s*)")
# Words that are mathematics, not units: never stripped after a number.
_MATH_WORDS = {"pi", "sqrt", "i", "e", "x", "y", "z", "n", "k", "sin", "cos", "tan", "log", "ln", "and", "or"}
_TRAILING_WORDS = re.compile(
    r"^(?P<num>.*?\d)\s*(?P<words>(?:[A-Za-z]{2,}\.?(?:\s+|$|(?=\^)))+)(?:\^\{?[23]\}?)?$"
)
_EQUATION_LHS = re.compile(r"^\s*[A-Za-z](?:_\{?\w+\}?)?(?:\([A-Za-z]\))?\s*=\s*(?P<rhs>[^=]+)$")
_PLAIN_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
_SLASH_FRACTION = re.compile(r"^([+-]?\d+)\s*/\s*(\d+)$")
_LATEX_FRACTION = re.compile(r"^([+-]?)\\frac\s*\{\s*([+-]?\d+)\s*\}\s*\{\s*(\d+)\s*\}$")
_LATEX_FRACTION_SHORT = re.compile(r"^([+-]?)\\frac(\d)(\d)$")
_PERCENT = re.compile(r"\s*(?:\\%|%|\s*percent)$")
_SCI_TIMES = re.compile(
    r"^([+-]?\d+(?:\.\d+)?)\s*(?:\\times|\\cdot|\*|x)\s*10\s*\^\s*\{?\s*([+-]?\d+)\s*\}?$"
)


@dataclass(frozen=True)
class NumericAnswer:
    """A plain number: its exact value, whether it was written as a decimal, and whether with a percent."""

    value: Fraction
    is_float: bool
    percent: bool


def strip_wrappers(text: str) -> str:
    """Removes math delimiters, bold markers and trailing punctuation around an answer."""
    text = text.strip()
    changed = True
    while changed and text:
        changed = False
        for left, right in _WRAPPERS:
            if len(text) > len(left) + len(right) and text.startswith(left) and text.endswith(right):
                text = text[len(left) : len(text) - len(right)].strip()
                changed = True
        if text.endswith((".", ",", ";")) and not text.endswith("\\."):
            text = text[:-1].rstrip()
            changed = True
    return text


def normalize_answer(text: str) -> str:
    """A cleaned answer string: what math-verify (or the fast path) should see.

    The rewrites are meaning-preserving for final answers: ``\\dfrac`` -> ``\\frac``, ``\\text{...}``
    unwrapped, spacing commands dropped, degrees / currency / trailing unit words removed after a number,
    thousands separators removed (``1,000`` -> ``1000``, ``1\\,000`` -> ``1000``), ``x = 5`` -> ``5``.
    """
    text = strip_wrappers(text)
    text = _FRAC_STYLE.sub(r"\\frac", text)
    text = _LEFT_RIGHT.sub("", text)
    text = text.replace("{,}", ",")
    # Thousands separators written as thin spaces: do this before dropping spacing commands.
    if _SPACE_THOUSANDS.match(text.replace(" ", " ")):
        text = re.sub(r"\\,|\s|\{,\}|,", "", text)
    text = _SPACING.sub(" ", text)
    text = _TEXT_CMD.sub(lambda m: f" {m.group(1)} ", text)
    text = re.sub(r"\s+", " ", text).strip()
    text = _DEGREES.sub("", text).strip()
    text = _CURRENCY.sub("", text).strip()
    # Unit words follow short answers; the length bound keeps this regex's backtracking off long text.
    match = _TRAILING_WORDS.match(text) if len(text) <= 200 else None
    if match:
        words = {w.strip(".").lower() for w in match.group("words").split()}
        if not words & _MATH_WORDS:
            text = match.group("num").strip()
    text = strip_wrappers(text)
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    match = _EQUATION_LHS.match(text)
    if match:
        text = match.group("rhs").strip()
    return text


_COMMAND_END = re.compile(r"\\[A-Za-z]+$")


def compact(text: str) -> str:
    """``text`` without insignificant spaces (kept after a command name like ``\\pi`` and between digits)."""
    if " " not in text:
        return text
    parts = text.split(" ")
    out = parts[0]
    for part in parts[1:]:
        if not part:
            continue
        if _COMMAND_END.search(out) or (out[-1:].isdigit() and part[0].isdigit()):
            out += " "
        out += part
    return out


def parse_number(text: str) -> NumericAnswer | None:
    """``text`` as a plain number (integer, decimal, scientific, ``a/b``, ``\\frac{a}{b}``, percent) or ``None``."""
    text = text.strip()
    percent = False
    match = _PERCENT.search(text)
    if match:
        percent = True
        text = text[: match.start()].strip()
    if not text:
        return None
    try:
        if _PLAIN_NUMBER.match(text):
            is_float = any(c in text for c in ".eE")
            return NumericAnswer(Fraction(text), is_float, percent)
        match = _SLASH_FRACTION.match(text)
        if match and int(match.group(2)) != 0:
            return NumericAnswer(Fraction(int(match.group(1)), int(match.group(2))), False, percent)
        match = _LATEX_FRACTION.match(text) or _LATEX_FRACTION_SHORT.match(text)
        if match and int(match.group(3)) != 0:
            sign = -1 if match.group(1) == "-" else 1
            return NumericAnswer(sign * Fraction(int(match.group(2)), int(match.group(3))), False, percent)
        match = _SCI_TIMES.match(text)
        if match and abs(int(match.group(2))) <= 400:
            value = Fraction(match.group(1)) * Fraction(10) ** int(match.group(2))
            return NumericAnswer(value, True, percent)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return None


def numbers_equal(
    gold: NumericAnswer, pred: NumericAnswer, *, float_rounding: int = 6, rel_tol: float | None = None
) -> tuple[bool, str]:
    """Whether two plain numbers are the same answer, and how that was decided.

    Exact values are compared exactly. When either side was written as a decimal, both are rounded to
    ``float_rounding`` decimals (math-verify's rule, so ``1/3`` equals ``0.333333`` but not ``0.333``), or
    compared with relative tolerance ``rel_tol`` when that is set. A percent on one side also matches its
    value divided by 100 (``50%`` = ``0.5`` = ``50``), as math-verify does.
    """
    candidates = [(gold.value, pred.value, "")]
    if pred.percent != gold.percent:
        if pred.percent:
            candidates.append((gold.value, pred.value / 100, " (percent converted)"))
        else:
            candidates.append((gold.value / 100, pred.value, " (percent converted)"))
    inexact = gold.is_float or pred.is_float
    for g, p, note in candidates:
        if g == p:
            return True, "exact numeric match" + note
        if rel_tol is not None and abs(g - p) <= rel_tol * max(abs(g), abs(p)):
            return True, f"numeric match within relative tolerance {rel_tol}" + note
        if inexact and rel_tol is None and round(g, float_rounding) == round(p, float_rounding):
            return True, f"numeric match after rounding to {float_rounding} decimals" + note
    return False, "numbers differ"


@dataclass(frozen=True)
class NumericStructure:
    """A tuple, interval or set whose elements are all plain numbers.

    ``kind`` is ``"set"`` (``\\{1, 2\\}`` or a bare list ``1, 2``: order and repeats don't matter) or
    ``"sequence"`` (``(1, 2)``, ``[1, 2)``: order and brackets matter, as for math-verify's tuples and intervals).
    """

    kind: str
    brackets: str
    values: tuple[NumericAnswer, ...]


_SET_BRACES = re.compile(r"^\\\{(.*)\\\}$")


def parse_structure(text: str) -> NumericStructure | None:
    """``text`` as a :class:`NumericStructure`, or ``None`` when it is not one (or any element is not a number)."""
    text = text.strip()
    if "," not in text:
        return None
    match = _SET_BRACES.match(text)
    if match:
        kind, brackets, inner = "set", "{}", match.group(1)
    elif text[0] in "([" and text[-1] in ")]":
        kind, brackets, inner = "sequence", text[0] + text[-1], text[1:-1]
    elif text[0] not in "([{\\" and "=" not in text:
        kind, brackets, inner = "set", "", text
    else:
        return None
    if any(c in inner for c in "()[]{}"):
        return None  # nested structure: leave it to sympy
    values = []
    for part in inner.split(","):
        number = parse_number(part)
        if number is None or number.percent:
            return None
        values.append(number)
    if len(values) < 2:
        return None
    return NumericStructure(kind, brackets, tuple(values))


def structures_equal(
    gold: NumericStructure, pred: NumericStructure, *, float_rounding: int = 6, rel_tol: float | None = None
) -> bool | None:
    """Whether two numeric structures are equal; ``None`` when they are of different kinds (ask sympy)."""
    if gold.kind != pred.kind:
        return None

    def eq(a: NumericAnswer, b: NumericAnswer) -> bool:
        return numbers_equal(a, b, float_rounding=float_rounding, rel_tol=rel_tol)[0]

    if gold.kind == "sequence":
        if gold.brackets != pred.brackets or len(gold.values) != len(pred.values):
            return False
        return all(eq(a, b) for a, b in zip(gold.values, pred.values, strict=True))
    # Sets: every element of each side has an equal element on the other (repeats collapse, as in FiniteSet).
    return all(any(eq(a, b) for b in pred.values) for a in gold.values) and all(
        any(eq(a, b) for a in gold.values) for b in pred.values
    )
