"""Answer normalisation, the plain-number fast path and the numeric tolerance rule.

math-verify's parser is good at LaTeX but costs milliseconds per call (sympy), and a few surface forms
common in model outputs trip it (``1.5e3`` becomes ``1.5*E*3``, ``5 dollars`` becomes a product of
symbols, ``32,\\! 349`` is not a number...). Here an extracted answer is cleaned up first (wrappers, units,
degrees, currency, thousands separators, ``x = ...``), words after a number that change its value are
converted (``5 million``) or flagged (``5 times 3``), and answers that are then plain numbers (or tuples,
intervals and sets of them) are compared exactly with :class:`fractions.Fraction`, without sympy;
everything else goes to math-verify.

Tolerance (:func:`numbers_equal`): two exact values (integers, fractions, terminating decimals written in
full) are equal only when they are equal. A decimal matches a different value only as its rounding: it
must carry at least ``float_rounding`` (6) significant digits, be that value rounded at its own last digit,
and lie within half a unit of the 6th decimal (math-verify's rule), so ``0.333333`` = ``1/3`` but
``0.333`` != ``1/3``, ``1e-7`` != ``2e-7`` and ``1e-7`` != ``0``. A percent answer against a bare gold is its
value / 100 only (``50%`` = ``0.5`` != ``50``); a percent gold accepts both.

Also here: :func:`constants_equal` (closed-form constants with ``i`` as the imaginary unit, exactly) and the
checks on a completion's final answer, :func:`malformed` and :func:`malformed_command` (``\\sqrt(16)``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

import sympy

from rewardlab.verifiers.math.extract import NEGATION, brace_map

_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("**", "**"))
_TEXT_CMD = re.compile(
    r"\\(?:text|textbf|textit|textnormal|textrm|mathrm|mathbf|mathit|mbox|operatorname)\s*\{([^{}]*)\}"
)
# Spacing commands become spaces; a matrix row separator ``\\`` (even followed by a space) is kept.
_SPACING = re.compile(r"\\\\|\\[,;:!> ]|\\q?quad(?![A-Za-z])|~")
_PADDED_GROUP = re.compile(r"\{ ([^{} ]+) \}")
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree|\s*\bdegrees?\b")
_LEFT_RIGHT = re.compile(r"\\(?:left|right)\s*(?=[()\[\]|.]|\\[{}|])")
_FRAC_STYLE = re.compile(r"\\[dtc]frac")
_THOUSANDS = re.compile(r"^-?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?$")
# MATH-style and typeset thousands at the start of an answer: ``32,\! 349``, ``1{,}000``, ``1\,000``,
# ``1,000``, ``1 000`` (a comma followed by a space is a list: ``1, 234``).
_LEADING_THOUSANDS = re.compile(
    r"^(-?)([1-9]\d{0,2}(?:(?:,\\!\s*|,\\,\s*|\{,\}|,(?=\d)|\\,\s*|\\!\s*|[ \u00a0\u202f])\d{3}(?!\d))+)((?:\.\d+)?)"
)
_THOUSANDS_SEPS = re.compile(r",\\!\s*|,\\,\s*|\{,\}|,|\\,\s*|\\!\s*|[ \u00a0\u202f]")
_CURRENCY = re.compile(r"^(?:\\\$|\$|USD\s*|US\$|€|£|¥|₹|\\pounds\s*|\\euro\s*|\\yen\s*)")
_TRAILING_CURRENCY = re.compile(r"(?<=\d)\s*(?:\\\$|\$|€|£|¥|₹)$")
_STRAY_DOLLAR = re.compile(r"(?<!\\)\$")
# Words that are mathematics, not units: never stripped after a number.
_MATH_WORDS = {"pi", "sqrt", "i", "e", "x", "y", "z", "n", "k", "sin", "cos", "tan", "log", "ln", "and", "or"}
_TRAILING_WORDS = re.compile(
    r"^(?P<num>.*?[\d}])\s*(?P<words>(?:[A-Za-z]{1,}\.?(?:\s+|$|(?=\^)))+)(?:\^\{?[23]\}?|²|³)?$"
)
# Words after a number that change its value: scale words are converted, powers are applied, and
# operations / comparisons / counting units make the answer not a plain number (never stripped as units).
_SCALE = {
    "hundred": 100,
    "thousand": 1000,
    "million": 10**6,
    "billion": 10**9,
    "trillion": 10**12,
    "dozen": 12,
    "gross": 144,
}
_POWER = {"squared": 2, "cubed": 3}
_CHANGES_VALUE = {
    "times",
    "plus",
    "minus",
    "over",
    "divided",
    "multiplied",
    "more",
    "less",
    "fewer",
    "than",
    "half",
    "halves",
    "third",
    "thirds",
    "quarter",
    "quarters",
    "fifth",
    "fifths",
    "tenth",
    "tenths",
    "hundredth",
    "hundredths",
    "pair",
    "pairs",
    "couple",
    "couples",
    "score",
    "of",
    "out",
    "per",
    "power",
    "factorial",
    "k",
}
_PERCENT_WORDS = {"percent", "pct", "percentage", "percents"}
_CONJUNCTION = re.compile(r"\s*,?\s*\b(?:and/or|or|and)\b\s*", re.IGNORECASE)
_HEDGE_WORDS = re.compile(r"^\s*(?:either|both)\b\s*", re.IGNORECASE)
_EQUATION_LHS = re.compile(r"^\s*[A-Za-z](?:_\{?\w+\}?)?(?:\([A-Za-z]\))?\s*=\s*(?P<rhs>[^=]+)$")
_PLAIN_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
_SLASH_FRACTION = re.compile(r"^([+-]?\d+)\s*/\s*(\d+)$")
_LATEX_FRACTION = re.compile(r"^([+-]?)\\frac\s*\{\s*([+-]?\d+)\s*\}\s*\{\s*(\d+)\s*\}$")
_LATEX_FRACTION_SHORT = re.compile(r"^([+-]?)\\frac(\d)(\d)$")
_PERCENT = re.compile(r"\s*(?:\\%|%|\s*percent)$")
PERCENT_REFUSAL = (
    "a percent answer against a bare gold number: x% is read as x/100 only (the verifier cannot know "
    "whether the problem asked for a percent)"
)
_SCI_TIMES = re.compile(
    r"^([+-]?\d+(?:\.\d+)?)\s*(?:\\times|\\cdot|\*|x)\s*10\s*\^\s*\{?\s*([+-]?\d+)\s*\}?$"
)
_POWER_OF_TEN = re.compile(r"^([+-]?)10\s*\^\s*\{?\s*([+-]?\d+)\s*\}?$")
_DECIMAL_COMMA = re.compile(r"^(-?\d+),(\d+)$")


@dataclass(frozen=True)
class NumericAnswer:
    """A plain number: its exact value, whether it was written as a decimal (``decimals`` places written,
    ``sig`` significant digits), and whether with a percent."""

    value: Fraction
    is_float: bool
    percent: bool
    decimals: int = 0
    sig: int = 0


@dataclass(frozen=True)
class Normalized:
    """A normalised answer and, when words after its number change its value (``5 times 3``), why it is not
    the plain number it starts with."""

    text: str
    issue: str | None = None


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


def _top_level_split(text: str, seps: str = ",") -> list[str]:
    """``text`` split at the separators outside brackets and braces."""
    parts, depth, last, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in "{}":
            depth += 1 if text[i + 1] == "{" else -1
            i += 2
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch in seps and depth == 0:
            parts.append(text[last:i])
            last = i + 1
        i += 1
    parts.append(text[last:])
    return parts


def _encloses(text: str, open_len: int, close_len: int) -> bool:
    """Whether the first ``open_len`` and last ``close_len`` characters are one bracket pair around all."""
    depth, i = 0, 0
    end = len(text) - close_len
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in "{}":
            depth += 1 if text[i + 1] == "{" else -1
            i += 2
        else:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            i += 1
        if depth == 0 and open_len <= i <= end and i < len(text):
            return False
    return depth == 0


def _fraction_text(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{value.numerator}/{value.denominator}"


def _number_words(num: str, words: list[str]) -> tuple[str | None, str | None]:
    """(rewritten answer, issue) for a number followed by words; ``(None, None)``: strip them as units."""
    first = words[0]
    number = parse_number(num)
    if first in _SCALE or first.rstrip("s") in _SCALE:
        scale = _SCALE.get(first, _SCALE.get(first.rstrip("s")))
        if number is None or number.percent:
            return None, f"the word {first!r} after the answer changes its value"
        return _fraction_text(number.value * scale), None
    if first in _POWER:
        if number is None:
            return None, f"the word {first!r} after the answer changes its value"
        return _fraction_text(number.value ** _POWER[first]), None
    if first in _PERCENT_WORDS or words[:2] == ["per", "cent"]:
        return f"{num}\\%", None
    for word in words:
        if word in _CHANGES_VALUE or word.rstrip("s") in _CHANGES_VALUE or word in _SCALE:
            return None, f"the word {word!r} after the answer changes its value"
    return None, None


def _conjunction_list(text: str) -> str:
    """``4 or 5`` / ``12 and 13`` / ``x = 4 or x = 5`` -> a comma list (a set of answers: a hedge between
    values is then a set, which matches only a set gold); text with other words is left alone."""
    if not _CONJUNCTION.search(text):
        return text
    candidate = _CONJUNCTION.sub(", ", _HEDGE_WORDS.sub("", text)).strip(" ,")
    if re.search(r"[A-Za-z]{2,}", re.sub(r"\\[A-Za-z]+", "", candidate)):
        return text
    return candidate


def normalize(text: str, *, plain_text: bool = False, single: bool = True) -> Normalized:
    """The cleaned answer (what math-verify or the fast path sees) and any value-changing words found.

    ``plain_text``: the answer comes from prose (the last number, an answer-is phrase, a bare reference), so
    an unambiguous decimal comma (``1,22``, ``0,111``, ``1000,99``) is a decimal point. ``single``: the answer
    is one value, so ``x = 5`` is ``5`` (in a list ``k = 45, n = 2`` the names are kept).
    """
    text = strip_wrappers(text)
    text = _FRAC_STYLE.sub(r"\\frac", text)
    text = _LEFT_RIGHT.sub("", text)
    text = _CURRENCY.sub("", text).strip()
    match = _LEADING_THOUSANDS.match(text)
    if match:
        digits = _THOUSANDS_SEPS.sub("", match.group(2))
        text = match.group(1) + digits + match.group(3) + text[match.end() :]
    text = _SPACING.sub(lambda m: m.group(0) if m.group(0) == "\\\\" else " ", text)
    text = _TEXT_CMD.sub(lambda m: f" {m.group(1)} ", text)
    text = _TEXT_CMD.sub(lambda m: f" {m.group(1)} ", text)  # \text{\textbf{...}}
    text = _PADDED_GROUP.sub(r"{\1}", text)  # ``\frac{1}{\mathrm{e}}`` -> ``\frac{1}{e}``, not ``{ e }``
    text = _STRAY_DOLLAR.sub(" ", text)
    text = re.sub(r"\s+", " ", text).strip()
    text = _DEGREES.sub("", text).strip()
    text = _CURRENCY.sub("", text).strip()
    text = _TRAILING_CURRENCY.sub("", text).strip()
    text = _conjunction_list(text)
    issue = None
    # Unit words follow short answers; the length bound keeps this regex's backtracking off long text.
    match = _TRAILING_WORDS.match(text) if len(text) <= 200 else None
    if match:
        words = [w.strip(".").lower() for w in match.group("words").split()]
        if not set(words) & _MATH_WORDS:
            rewritten, issue = _number_words(match.group("num").strip(), words)
            if rewritten is not None:
                text = rewritten
            elif issue is None:
                text = match.group("num").strip()
    text = strip_wrappers(text)
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    if plain_text:
        match = _DECIMAL_COMMA.match(text)
        if match and len(match.group(2)) >= 2:
            integer = match.group(1).lstrip("-")
            thousands = len(match.group(2)) == 3 and 1 <= len(integer) <= 3 and not integer.startswith("0")
            if not thousands:
                text = f"{match.group(1)}.{match.group(2)}"
    # ``{1, 2}``: braces without backslashes group in LaTeX (they print nothing), so this is the list ``1, 2``
    grouped = text.startswith("{") and text.endswith("}") and _encloses(text, 1, 1)
    if grouped and len(_top_level_split(text[1:-1])) > 1:
        text = text[1:-1].strip()
    if single:
        match = _EQUATION_LHS.match(text)
        if match and not re.search(r"[A-Za-z]", re.sub(r"\\[A-Za-z]+", "", match.group("rhs"))):
            text = match.group("rhs").strip()
    return Normalized(text, issue)


def normalize_answer(text: str, *, plain_text: bool = False) -> str:
    """A cleaned answer string: what math-verify (or the fast path) should see.

    The rewrites are meaning-preserving for final answers: ``\\dfrac`` -> ``\\frac``, ``\\text{...}``
    unwrapped, spacing commands dropped, degrees / currency / trailing unit words removed after a number,
    thousands separators removed (``1,000`` -> ``1000``, ``32,\\! 349`` -> ``32349``), ``x = 5`` -> ``5``,
    scale words applied (``5 million`` -> ``5000000``), ``4 or 5`` -> ``4, 5``.
    """
    return normalize(text, plain_text=plain_text).text


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


def _decimal_digits(mantissa: str, exponent: int = 0) -> tuple[int, int]:
    """(decimal places, significant digits) of a decimal literal ``mantissa`` x 10^``exponent``."""
    mantissa = mantissa.lstrip("+-")
    places = len(mantissa.split(".", 1)[1]) if "." in mantissa else 0
    digits = mantissa.replace(".", "").lstrip("0")
    return places - exponent, len(digits)


def parse_number(text: str) -> NumericAnswer | None:
    """``text`` as a plain number (integer, decimal, scientific, ``a/b``, ``\\frac{a}{b}``, ``10^{k}``, percent)
    or ``None``."""
    text = text.strip()
    percent = False
    match = _PERCENT.search(text)
    if match:
        percent = True
        text = text[: match.start()].strip()
    if not text or len(text) > 100:
        return None
    try:
        if _PLAIN_NUMBER.match(text):
            is_float = any(c in text for c in ".eE")
            mantissa, _, exponent = text.lower().partition("e")
            places, sig = _decimal_digits(mantissa, int(exponent or 0)) if is_float else (0, 0)
            if abs(int(exponent or 0)) > 400:
                return None
            return NumericAnswer(Fraction(text), is_float, percent, places, sig)
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
            places, sig = _decimal_digits(match.group(1), int(match.group(2)))
            return NumericAnswer(value, True, percent, places, sig)
        match = _POWER_OF_TEN.match(text)
        if match and abs(int(match.group(2))) <= 400:
            sign = -1 if match.group(1) == "-" else 1
            return NumericAnswer(sign * Fraction(10) ** int(match.group(2)), False, percent)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return None


def rounding_matches(
    coarse: Fraction, places: int, sig: int, other: Fraction | float, float_rounding: int
) -> bool:
    """Whether the decimal ``coarse`` (``places`` decimals and ``sig`` significant digits written) is ``other``
    rounded at its own last digit, carries at least ``float_rounding`` significant digits, and lies within
    half a unit of the ``float_rounding``-th decimal (math-verify's absolute rule, kept as an upper bound)."""
    if sig < float_rounding:
        return False
    other = other if isinstance(other, Fraction) else Fraction(other)
    diff = abs(coarse - other)
    half_unit = Fraction(1, 2) * Fraction(10) ** (-places)
    # a float-printed gold (``f"{x:.15f}"``) may be off by one in its last digit: a hair of slack
    return diff <= half_unit * Fraction(1001, 1000) and diff <= Fraction(1, 2) * Fraction(10) ** (
        -float_rounding
    )


def numbers_equal(
    gold: NumericAnswer, pred: NumericAnswer, *, float_rounding: int = 6, rel_tol: float | None = None
) -> tuple[bool, str]:
    """Whether two plain numbers are the same answer, and how that was decided.

    Exact values are compared exactly. A decimal matches another value only as its rounding
    (:func:`rounding_matches`), or within the relative tolerance ``rel_tol`` when that is set.

    Percent: a percent gold (``50%``) matches ``50`` and ``0.5`` (the gold says a percent was asked for). A
    percent answer against a bare gold is read only as its value divided by 100 (``50%`` = ``0.5``, not
    ``50``): the verifier cannot know whether the problem asked for a percent, and accepting both would let
    a ``%`` sign hedge between the two readings.
    """
    if pred.percent and not gold.percent:
        shifted = NumericAnswer(pred.value / 100, pred.is_float, False, pred.decimals + 2, pred.sig)
        candidates = [(gold, shifted, " (percent converted)")]
    else:
        candidates = [(gold, pred, "")]
    if gold.percent and not pred.percent:
        shifted = NumericAnswer(gold.value / 100, gold.is_float, False, gold.decimals + 2, gold.sig)
        candidates.append((shifted, pred, " (percent converted)"))
    for g, p, note in candidates:
        if g.value == p.value:
            return True, "exact numeric match" + note
        if not (g.is_float or p.is_float):
            continue  # two distinct exact values are never equal
        if rel_tol is not None:
            if abs(g.value - p.value) <= Fraction(rel_tol) * max(abs(g.value), abs(p.value)):
                return True, f"numeric match within relative tolerance {rel_tol}" + note
            continue
        if g.is_float and p.is_float:
            coarse, other = (g, p) if g.decimals <= p.decimals else (p, g)
        else:
            coarse, other = (g, p) if g.is_float else (p, g)
        if rounding_matches(coarse.value, coarse.decimals, coarse.sig, other.value, float_rounding):
            return True, f"numeric match: a {coarse.sig}-significant-digit rounding" + note
    if pred.percent and not gold.percent and pred.value == gold.value:
        return False, PERCENT_REFUSAL
    return False, "numbers differ"


@dataclass(frozen=True)
class NumericStructure:
    """A tuple, interval, set or bare list whose elements are all plain numbers (or such structures).

    ``kind`` is ``"set"`` (``\\{1, 2\\}``: order and repeats don't matter), ``"list"`` (a bare ``1, 2``: a
    list of solutions, compared as a set with a set or a list, and in order with a parenthesised tuple) or
    ``"sequence"`` (``(1, 2)``, ``[1, 2)``: order and brackets matter, as for math-verify's tuples and
    intervals; ``brackets`` holds them).
    """

    kind: str
    brackets: str
    values: tuple


def outer_kind(text: str) -> str | None:
    """``"set"`` (``\\{...\\}``), ``"sequence"`` (a bracketed tuple or interval), ``"list"`` (a bare comma
    list) or ``None`` (one value)."""
    text = text.strip()
    if not text:
        return None
    if text.startswith("\\{") and text.endswith("\\}") and _encloses(text, 2, 2):
        return "set"
    if text[0] in "([" and text[-1] in ")]" and _encloses(text, 1, 1):
        return "sequence" if len(_top_level_split(text[1:-1], ",;")) > 1 else None
    if "=" not in text and len(_top_level_split(text, ",;")) > 1:
        return "list"
    return None


def parse_structure(text: str, _depth: int = 0) -> NumericStructure | None:
    """``text`` as a :class:`NumericStructure`, or ``None`` when it is not one (or any element is not a number)."""
    text = text.strip()
    if _depth > 3 or ("," not in text and ";" not in text):
        return None
    kind = outer_kind(text)
    if kind == "set":
        brackets, inner = "{}", text[2:-2]
    elif kind == "sequence":
        brackets, inner = text[0] + text[-1], text[1:-1]
    elif kind == "list":
        brackets, inner = "", text
    else:
        return None
    parts = _top_level_split(inner, ",") if "," in inner else _top_level_split(inner, ";")
    values = []
    for part in parts:
        number = parse_number(part)
        if number is not None and not number.percent:
            values.append(number)
            continue
        nested = parse_structure(part, _depth + 1)
        if nested is None:
            return None
        values.append(nested)
    if len(values) < 2:
        return None
    return NumericStructure(kind, brackets, tuple(values))


def structures_equal(
    gold: NumericStructure,
    pred: NumericStructure,
    *,
    float_rounding: int = 6,
    rel_tol: float | None = None,
    strict: bool = True,
) -> bool | None:
    """Whether two numeric structures are equal; ``None`` when they are of different kinds (ask sympy).
    With ``strict`` a set never equals a tuple or interval."""
    kinds = {gold.kind, pred.kind}
    if kinds == {"set", "sequence"}:
        return False if strict else None
    if kinds == {"list", "sequence"}:
        sequence = gold if gold.kind == "sequence" else pred
        if sequence.brackets != "()":
            return False if strict else None  # an interval's brackets are part of the answer

    def eq(a, b) -> bool:
        if isinstance(a, NumericAnswer) and isinstance(b, NumericAnswer):
            return numbers_equal(a, b, float_rounding=float_rounding, rel_tol=rel_tol)[0]
        if isinstance(a, NumericStructure) and isinstance(b, NumericStructure):
            return bool(structures_equal(a, b, float_rounding=float_rounding, rel_tol=rel_tol, strict=strict))
        return False

    if "sequence" in kinds:
        if gold.brackets != pred.brackets and "list" not in kinds or len(gold.values) != len(pred.values):
            return False
        return all(eq(a, b) for a, b in zip(gold.values, pred.values, strict=True))
    # Sets and lists: every element of each side has an equal element on the other (repeats collapse).
    return all(any(eq(a, b) for b in pred.values) for a in gold.values) and all(
        any(eq(a, b) for a in gold.values) for b in pred.values
    )


def distinct_numbers(gold: object, pred: object) -> bool:
    """Whether two sympy numbers that math-verify called equal differ: two exact values that are not equal
    (``10^{-7}`` and ``2 \\cdot 10^{-7}`` both round to ``0.000000``), or a decimal further than a rounding
    at six significant digits from the other value (math-verify's absolute rule alone makes every pair of
    values below ``5e-7`` equal). Anything that is not a pair of plain numbers gives ``False``."""
    try:
        if not (getattr(gold, "is_number", False) and getattr(pred, "is_number", False)):
            return False
        diff = abs(sympy.N(gold - pred, 30))
        if diff == 0:
            return False
        scale = max(abs(sympy.N(gold, 30)), abs(sympy.N(pred, 30)))
        if not (gold.has(sympy.Float) or pred.has(sympy.Float)):
            return bool(diff > scale * sympy.Float("1e-25"))
        return bool(diff > scale * sympy.Float("5e-6"))
    except Exception:  # a comparison sympy cannot evaluate (complex infinities, ...) is left to math-verify
        return False


_MAX_CONSTANT_OPS = 40
_MAX_EXPANDED_TERMS = 256


def _expanded_terms(expr: sympy.Expr) -> int:
    """An upper bound on the number of terms of ``expr`` once expanded (multinomial counts), capped just
    above :data:`_MAX_EXPANDED_TERMS` so that the bound itself stays cheap."""
    cap = _MAX_EXPANDED_TERMS + 1
    if expr.is_Add:
        return min(cap, sum(_expanded_terms(arg) for arg in expr.args))
    if expr.is_Mul:
        total = 1
        for arg in expr.args:
            total = min(cap, total * _expanded_terms(arg))
        return total
    if expr.is_Pow and expr.exp.is_Integer:
        base, power = _expanded_terms(expr.base), abs(int(expr.exp))
        if base == 1:
            return 1
        return cap if power > cap else min(cap, math.comb(power + base - 1, base - 1))
    return 1


def _has_symbol_i(expr: object) -> bool:
    return isinstance(expr, sympy.Expr) and any(s.name == "i" for s in expr.free_symbols)


def _with_imaginary_unit(expr: object) -> sympy.Expr | None:
    """``expr`` with its symbol ``i`` read as the imaginary unit when that makes it a small closed exact
    constant (no other symbol, no decimal, at most 40 operations and 256 terms expanded); else ``None``."""
    if not isinstance(expr, sympy.Expr) or expr.has(sympy.Float):
        return None
    imaginary = {s: sympy.I for s in expr.free_symbols if s.name == "i"}
    if len(imaginary) != len(expr.free_symbols) or sympy.count_ops(expr) > _MAX_CONSTANT_OPS:
        return None
    expr = expr.xreplace(imaginary)
    return expr if _expanded_terms(expr) <= _MAX_EXPANDED_TERMS else None


def constants_equal(gold: object, pred: object) -> bool:
    """Whether two closed-form constants are exactly equal once ``i`` is the imaginary unit (math-verify
    parses ``i`` as a variable, so ``e^{i\\pi}`` != ``-1`` there). Exact: the difference, expanded into real
    and imaginary parts, must be 0 itself; never a numeric closeness, and not ``sympy.simplify`` (which calls
    ``7 - (1+i)^{20000}`` zero). Only pairs where a side has an ``i`` are tried, and only small ones."""
    if not (_has_symbol_i(gold) or _has_symbol_i(pred)):
        return False
    a, b = _with_imaginary_unit(gold), _with_imaginary_unit(pred)
    if a is None or b is None or _expanded_terms(a - b) > _MAX_EXPANDED_TERMS:
        return False
    try:
        return sympy.expand(a - b, complex=True) == 0
    except Exception:  # a difference sympy cannot form or expand is not shown equal
        return False


_PERCENT_SIGN = re.compile(r"\s*\\?%")


def percent_as_hundredths(text: str) -> str:
    """``text`` with each percent sign written as a factor 1/100 (``33\\frac{1}{3}\\%`` ->
    ``33\\frac{1}{3} \\cdot \\frac{1}{100}``)."""
    return _PERCENT_SIGN.sub(lambda _: " \\cdot \\frac{1}{100}", text)


# -- checks on a completion's final answer -------------------------------------------------------------------
_DANGLING_END = re.compile(
    r"(?:[+\-*/^_=<>]|\\(?:times|cdot|div|pm|mp|frac|dfrac|sqrt|left|right|le|ge|leq|geq|lt|gt)|\\)\s*$"
)
_DANGLING_START = re.compile(r"^\s*(?:[*/^_=<>]|\\(?:times|cdot|div)(?![A-Za-z]))")
_EMPTY_GROUP = re.compile(r"(?:\\(?:frac|sqrt|binom)|[\^_])\s*\{\s*\}|\\frac\s*\{[^{}]*\}\s*$")


def malformed(text: str) -> str | None:
    """Why ``text`` is not well-formed LaTeX (so that only a prefix of it would parse), or ``None``."""
    if not text:
        return None
    plain = text.replace("\\{", "").replace("\\}", "")
    depth = 0
    for ch in plain:
        depth += ch == "{"
        depth -= ch == "}"
        if depth < 0:
            return "unbalanced braces"
    if depth:
        return "unbalanced braces"
    if plain.count("(") + plain.count("[") != plain.count(")") + plain.count("]"):
        return "unbalanced brackets"
    if text.count("\\{") != text.count("\\}"):
        return "unbalanced set braces"
    if text.count("\\begin") != text.count("\\end"):
        return "unbalanced environment"
    if _DANGLING_END.search(text) or _DANGLING_START.search(text):
        return "a dangling operator"
    if _EMPTY_GROUP.search(text):
        return "an empty or missing argument"
    return None


# Commands whose arguments are brace groups or, as TeX allows, single tokens: ``\frac12``, ``\sqrt2``,
# ``\frac\pi2`` (a digit, a letter or a control word). Anything else (``\sqrt(16)``) has no one reading.
_ARGUMENT_COMMAND = re.compile(r"\\(sqrt|[dtc]?frac|[dt]?binom)(?![A-Za-z])")
_ONE_TOKEN = re.compile(r"[A-Za-z0-9]|\\[A-Za-z]+")
# Control words that are not a one-token value: commands that take arguments themselves, delimiters, operators.
_NOT_ONE_TOKEN = re.compile(
    r"\\(?:left|right|[bB]igg?[lr]?|sqrt|[dtc]?frac|[dt]?binom|text\w*|math\w+|operatorname|"
    r"cdot|times|div|pm|mp|le|ge|leq|geq|neq?)$"
)
_SPACED_DIGIT = re.compile(r"\s*\d")


def _skip_spaces(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _argument_problem(text: str, pos: int, count: int, closes: dict[int, int]) -> str | None:
    """Why the ``count`` arguments from ``pos`` are not brace groups or unambiguous single tokens
    (``closes``: :func:`.extract.brace_map` of ``text``)."""
    for i in range(count):
        pos = _skip_spaces(text, pos)
        if pos < len(text) and text[pos] == "{":
            if pos not in closes:
                return None  # unbalanced braces: :func:`malformed` says so
            pos = closes[pos] + 1
            continue
        if pos >= len(text):
            return "an argument is missing"
        token = _ONE_TOKEN.match(text, pos)
        if token is None or _NOT_ONE_TOKEN.match(token.group(0)):
            return f"its argument is neither a brace group nor one token ({text[pos : pos + 10]!r})"
        pos = token.end()
        glued = len(token.group(0)) == 1 and text[pos : pos + 1].isalnum()
        spaced = token.group(0).isdigit() and _SPACED_DIGIT.match(text, pos)
        if i == count - 1 and (glued or spaced):
            shown = text[token.start() : pos + 3]
            return f"a one-character argument with more after it ({shown!r}: TeX takes one character)"
    return None


def malformed_command(text: str) -> str | None:
    """Why a ``\\sqrt`` / ``\\frac`` / ``\\binom`` in ``text`` has no single reading, or ``None``.

    Its arguments must be brace groups or, as TeX allows, single tokens (``\\sqrt2``, ``\\frac12``,
    ``\\frac 1 2``, ``\\frac\\pi2``). A parenthesis (``\\sqrt(16)``, ``\\frac(1)(2)``) or a one-token last
    argument with more digits or letters right after it (``\\sqrt16``, ``\\frac123``, ``\\sqrt 4x``: TeX
    reads ``\\sqrt{1}6``, a writer may mean ``\\sqrt{16}``) is refused."""
    closes: dict[int, int] | None = None
    for match in _ARGUMENT_COMMAND.finditer(text):
        closes = brace_map(text)[0] if closes is None else closes
        pos = match.end()
        if match.group(1) == "sqrt":
            start = _skip_spaces(text, pos)
            if text.startswith("[", start):  # the root's index, ``\sqrt[3]{8}`` (a long one is not checked)
                close = text.find("]", start, start + 100)
                if close < 0:
                    continue
                pos = close + 1
        problem = _argument_problem(text, pos, 1 if match.group(1) == "sqrt" else 2, closes)
        if problem:
            return f"malformed latex command \\{match.group(1)}: {problem}"
    return None


def negated(text: str) -> str | None:
    """The negation in ``text`` (``not``, ``\\neq``, ...) or ``None``."""
    match = NEGATION.search(text)
    return match.group(0) if match else None
