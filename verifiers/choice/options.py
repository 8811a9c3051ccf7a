"""The reference side of the ``choice`` verifier: the gold letter and the options' texts of one record.

A reference is the gold letter (``"B"``, ``"(B)"``, ``"b"``), a 0-based gold index (``1`` = B, as MMLU's
``answer`` and MMLU-Pro's ``answer_index`` columns hold it), or a dict ``{"answer": ..., "options": ...}``
whose options are a list in letter order or a dict letter -> text. Without options in the reference, a list
or dict in ``record.metadata["options"]`` is used (MMLU-Pro rows carry one). Anything else is malformed: the
caller turns :class:`ReferenceError` into a one-line failure.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

LETTERS = string.ascii_uppercase


class ReferenceError(ValueError):  # noqa: A001 - the module's own kind of error, not the builtin
    """A malformed reference or options (one line, shown as the record's error)."""


@dataclass(frozen=True)
class Choices:
    """What a record allows: the gold letter, the letters an answer may name, and the options' texts."""

    gold: str
    letters: str
    """The allowed letters in order (``"ABCD"`` for four options)."""
    texts: dict[str, str] = field(default_factory=dict)
    """Letter -> option text, as given (empty when the record gives no options)."""
    normalized: dict[str, str] = field(default_factory=dict)
    """Normalised option text -> letter, for texts no other option shares once normalised."""

    def letter_of_text(self, text: str) -> str | None:
        """The letter whose option text equals ``text`` once both are normalised, else ``None``."""
        return self.normalized.get(normalize_text(text)) if self.normalized else None


_MARKUP = re.compile(r"\\text(?:bf|it)?\{([^{}]*)\}|\\mathrm\{([^{}]*)\}|[*_`$]|\\[()\[\]]")
_SPACE = re.compile(r"\s+")
_SPACED_MINUS = re.compile(r"(?:(?<=\s)|^)-\s+(?=[\d.])")


def normalize_text(text: str) -> str:
    """Option text compared loosely: NFKC, markdown and ``\\text{}`` wrappers dropped, case folded, spacing
    collapsed, surrounding quotes and final punctuation stripped."""
    text = unicodedata.normalize("NFKC", text).replace("\u2212", "-")
    text = _MARKUP.sub(lambda m: m.group(1) or m.group(2) or "", text)
    text = _SPACED_MINUS.sub("-", _SPACE.sub(" ", text).strip()).casefold()
    return text.strip("\"'“”‘’ ").rstrip(".;:!,").strip()


def parse_choices(reference: Any, metadata: Mapping[str, Any] | None, max_letters: int) -> Choices:
    """The gold letter and options of one record.

    Raises:
        ReferenceError: the reference or the options are malformed, or the gold is not an allowed letter.
    """
    options: Any = None
    answer = reference
    if isinstance(reference, Mapping):
        if "answer" not in reference:
            raise ReferenceError("reference dict has no 'answer' key")
        answer, options = reference["answer"], reference.get("options")
    if options is None and metadata:
        options = metadata.get("options")
    texts = _option_texts(options, max_letters) if options is not None else {}
    letters = "".join(texts) if texts else LETTERS[:max_letters]
    gold = _gold_letter(answer, letters)
    return Choices(gold=gold, letters=letters, texts=texts, normalized=_text_index(texts))


def _option_texts(options: Any, max_letters: int) -> dict[str, str]:
    if isinstance(options, Mapping):
        texts = {}
        for key, value in options.items():
            letter = str(key).strip().strip("()").upper()
            if len(letter) != 1 or letter not in LETTERS:
                raise ReferenceError(f"option key {key!r} is not a letter")
            texts[letter] = str(value)
        texts = dict(sorted(texts.items()))
    elif isinstance(options, (list, tuple)):
        texts = {LETTERS[i]: str(text) for i, text in enumerate(options) if i < len(LETTERS)}
    else:
        raise ReferenceError(f"options must be a list or a dict letter -> text, got {type(options).__name__}")
    if not texts:
        raise ReferenceError("options are empty")
    beyond = [letter for letter in texts if LETTERS.index(letter) >= max_letters]
    if beyond or len(options) > len(LETTERS):
        raise ReferenceError(f"{len(options)} options exceed the letters setting ({max_letters})")
    return texts


def _gold_letter(answer: Any, letters: str) -> str:
    if isinstance(answer, bool):
        raise ReferenceError(f"gold answer must be a letter or a 0-based index, got {answer!r}")
    if isinstance(answer, int):
        if not 0 <= answer < len(letters):
            raise ReferenceError(f"gold index {answer} is outside the {len(letters)} options")
        return letters[answer]
    if not isinstance(answer, str):
        raise ReferenceError(f"gold answer must be a letter or a 0-based index, got {type(answer).__name__}")
    letter = answer.strip().strip("()[]").strip().rstrip(".").upper()
    if len(letter) != 1 or letter not in LETTERS:
        raise ReferenceError(f"gold answer {answer!r} is not a letter")
    if letter not in letters:
        raise ReferenceError(f"gold answer {letter} is not one of the options {letters[0]}-{letters[-1]}")
    return letter


def _text_index(texts: dict[str, str]) -> dict[str, str]:
    """Normalised text -> letter; texts two options share (or that are empty) are left out: they name no one
    option."""
    index: dict[str, str] = {}
    shared: set[str] = set()
    for letter, text in texts.items():
        key = normalize_text(text)
        if not key or key in index:
            shared.add(key)
        index[key] = letter
    return {key: letter for key, letter in index.items() if key not in shared}
