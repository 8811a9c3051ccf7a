"""The short-answer QA verifier: SQuAD's exact match and token F1, DPR's has-answer, over gold aliases.

Pipeline for one record (docs/qa.md):

1. **Gold**: the reference as a list of aliases (a string, a list, ``{"answers": [...]}`` or verl's
   Search-R1 ``{"target": [...]}``); aliases that normalise to nothing ("The", "?") are ignored, since they
   equal every empty answer and occur in every answer.
2. **Read** the answer (:func:`rewardlab.verifiers.qa.answer.read_answer`): an ``<answer>`` block, an answer
   line or a box after the last ``</think>``, else (``read="any"``) the whole response.
3. **Figures**: SQuAD v1.1's EM and F1 (max over aliases) and DPR's has-answer, on the normalised answer:
   ``details["em"]`` / ``["f1"]`` are exactly the official script's numbers for the answer as read.
4. **Refuse** (reward 0 with a reason) what does not commit to one answer: a reading problem (cut off,
   different answers stated, retracted), an empty answer, and, unless it equals an alias exactly, an answer
   longer than ``max_answer_tokens``, a list naming a gold alias with other candidates, or a hedge or
   negation word no alias has.
5. **Reward** by ``mode``: ``em`` 1/0, ``contains`` 1/0, ``f1`` the F1 itself.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from rewardlab.types import Record, Result
from rewardlab.verifiers.base import Verifier
from rewardlab.verifiers.qa.answer import READ_MODES, AnswerReading, read_answer
from rewardlab.verifiers.qa.hedge import hedge_word, listed_hedge
from rewardlab.verifiers.qa.normalize import NORMALIZATIONS, contains_tokens, normalized, token_f1

MODES = ("em", "f1", "contains")
REFERENCE_KEYS = ("answers", "target", "answer")


@dataclass(frozen=True)
class QAConfig:
    """Settings of :class:`QAVerifier` (the keyword arguments of ``get_verifier("qa", ...)``)."""

    mode: str = "em"
    """``em``: 1 when the normalised answer equals a normalised gold alias (SQuAD's exact match; Search-R1's
    reward). ``f1``: the reward is SQuAD's token F1, max over aliases. ``contains``: 1 when a gold alias's
    normalised token sequence occurs in the normalised answer (DPR's has-answer; on tokens, so "art" is not
    in "party")."""
    read: str = "any"
    """``any``: without an ``<answer>`` block, answer line or box, the whole response (after ``</think>``) is
    the answer: a policy asked for a short answer often writes just that. ``tagged``: such a completion has
    no answer (error ``no answer found``), as in Search-R1's reward."""
    max_answer_tokens: int | None = 20
    """An answer with more normalised tokens than this, and than the longest gold alias, scores 0 (long answers
    game F1's overlap and containment). It changes no ``em`` verdict: so long an answer equals no alias.
    ``None``: no cap."""
    f1_threshold: float = 0.5
    """``f1`` mode: ``details["correct"]`` is F1 >= this (accuracy summaries); the reward is the F1 itself."""
    normalization: str = "squad"
    """``squad``: SQuAD v1.1's ``normalize_answer`` exactly (the figures equal the official script's).
    ``unicode``: also NFKC, ``casefold`` and all Unicode punctuation removed (curly quotes, dashes,
    full-width forms match their ASCII gold)."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.read not in READ_MODES:
            raise ValueError(f"read must be one of {', '.join(READ_MODES)}, got {self.read!r}")
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(
                f"normalization must be one of {', '.join(NORMALIZATIONS)}, got {self.normalization!r}"
            )
        cap = self.max_answer_tokens
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ValueError(f"max_answer_tokens must be a positive integer or None, got {cap!r}")
        if isinstance(self.f1_threshold, bool) or not isinstance(self.f1_threshold, (int, float)):
            raise ValueError(f"f1_threshold must be a number in (0, 1], got {self.f1_threshold!r}")
        if not 0.0 < self.f1_threshold <= 1.0:
            raise ValueError(f"f1_threshold must be in (0, 1], got {self.f1_threshold!r}")


def gold_aliases(reference: Any) -> list[str]:
    """The gold aliases of a reference: a string, a list of strings (numbers are written as text), or a dict
    with one of :data:`REFERENCE_KEYS` holding either; array types (numpy, from parquet rows) are lists.

    Raises:
        ValueError: any other shape, an alias that is not text, or no alias at all.
    """
    if isinstance(reference, dict):
        key = next((k for k in REFERENCE_KEYS if k in reference), None)
        if key is None:
            raise ValueError(f"a reference dict needs one of the keys {', '.join(REFERENCE_KEYS)}")
        reference = reference[key]
    if hasattr(reference, "tolist") and not isinstance(reference, (str, list, tuple)):
        reference = reference.tolist()
    if isinstance(reference, (str, int, float)) and not isinstance(reference, bool):
        reference = [reference]
    if not isinstance(reference, (list, tuple)):
        raise ValueError(f"expected an answer string or a list of aliases, got {type(reference).__name__}")
    aliases = []
    for alias in reference:
        if isinstance(alias, bool) or not isinstance(alias, (str, int, float)):
            raise ValueError(f"every alias must be text, got {type(alias).__name__}")
        aliases.append(str(alias))
    if not aliases:
        raise ValueError("the reference has no answer")
    return aliases


@dataclass
class _Gold:
    """The aliases of one reference, normalised once."""

    aliases: list[str]
    all_normalized: list[str]
    usable: list[str]
    normalized: list[str]
    tokens: list[list[str]]


class QAVerifier(Verifier):
    """Short-answer QA reward: exact match, token F1 or containment of the answer against gold aliases.

    ``details``: ``extracted`` (the answer as read), ``extracted_span`` (``[start, end)`` in the completion),
    ``method`` (``answer_tag``, ``answer_line``, ``boxed``, ``whole``), ``normalized``, ``em``, ``f1``,
    ``contains`` (SQuAD's and DPR's figures, max over aliases), ``matched`` (the best alias), ``correct``,
    ``aliases``, and ``reason`` when the reward is 0.
    """

    name = "qa"
    answer_votes: ClassVar[str | None] = "exact"

    def __init__(self, **config: Any) -> None:
        unknown = sorted(set(config) - set(QAConfig.__dataclass_fields__))
        if unknown:
            raise ValueError(
                f"unknown qa verifier option(s) {unknown} (known: {sorted(QAConfig.__dataclass_fields__)})"
            )
        self.cfg = QAConfig(**config)
        super().__init__(**asdict(self.cfg))

    def _normalize(self, text: str) -> str:
        return normalized(text, self.cfg.normalization)

    def gold(self, reference: Any) -> _Gold:
        """The reference's aliases, normalised (raises ValueError on a malformed reference)."""
        aliases = gold_aliases(reference)
        all_forms = [self._normalize(a) for a in aliases]
        usable = [a for a, form in zip(aliases, all_forms, strict=True) if form]
        forms = [form for form in all_forms if form]
        return _Gold(aliases, all_forms, usable, forms, [f.split() for f in forms])

    def read(self, text: str) -> AnswerReading:
        """The answer of a completion, read by this verifier's settings."""
        return read_answer(text, read=self.cfg.read, normalize=self._normalize)

    def verify(self, record: Record) -> Result:
        try:
            gold = self.gold(record.reference)
        except ValueError as exc:
            return Result.failure(f"invalid reference: {exc}")
        if not gold.usable:
            return Result.failure(
                "invalid reference: every gold alias is empty after normalisation", aliases=gold.aliases
            )
        reading = self.read(record.completion_text)
        details = self._reading_details(reading, gold)
        if reading.answer is None:
            details["reason"] = reading.problem or reading.note or "no answer found"
            return Result.failure("no answer found", **details)
        figures = self._figures(reading.answer.text, gold)
        details.update(figures)
        refusal = reading.problem or self._refusal(reading.answer.text, details["normalized"], gold)
        if refusal:
            details.update(correct=False, reason=refusal)
            return Result(reward=0.0, details=details)
        return self._verdict(details)

    def _reading_details(self, reading: AnswerReading, gold: _Gold) -> dict[str, Any]:
        answer = reading.answer
        details: dict[str, Any] = {
            "extracted": answer.text if answer else None,
            "extracted_span": [answer.start, answer.end] if answer else None,
            "method": answer.method if answer else None,
            "normalized": self._normalize(answer.text) if answer else None,
            "aliases": gold.aliases,
            "correct": False,
        }
        if len(reading.stated) > 1:
            details["stated"] = [c.text for c in reading.stated]
        if len(gold.usable) < len(gold.aliases):
            details["ignored_aliases"] = [a for a in gold.aliases if a not in gold.usable]
        return details

    def _figures(self, answer: str, gold: _Gold) -> dict[str, Any]:
        """SQuAD's EM and F1 over every alias (the official figures) and DPR's has-answer, with the best alias."""
        norm = self._normalize(answer)
        tokens = norm.split()
        em = max(float(norm == form) for form in gold.all_normalized)
        f1s = [token_f1(tokens, form.split()) for form in gold.all_normalized]
        usable_f1 = [f1 for f1, form in zip(f1s, gold.all_normalized, strict=True) if form]
        contains = [contains_tokens(tokens, t) for t in gold.tokens]
        # The best usable alias: an exact one, else a contained one, else the highest F1.
        best = max(
            range(len(gold.usable)),
            key=lambda i: (gold.normalized[i] == norm, contains[i], usable_f1[i], -i),
        )
        useful = contains[best] or usable_f1[best] > 0
        return {
            "em": em,
            "f1": max(f1s),
            "contains": float(any(contains)),
            "matched": gold.usable[best] if useful else None,
        }

    def _refusal(self, answer: str, norm: str, gold: _Gold) -> str | None:
        """Why an answer that could score scores 0 (docs/qa.md, "Decision policy"), or None."""
        if not norm:
            return "empty answer: nothing is left after normalisation (only punctuation, articles or spaces)"
        if norm in gold.normalized:
            return None  # an answer equal to a gold alias commits to it, whatever its shape
        n_tokens, cap = len(norm.split()), self.cfg.max_answer_tokens
        longest = max(len(t) for t in gold.tokens)
        if cap is not None and n_tokens > max(cap, longest):
            return f"too long: {n_tokens} tokens, over max_answer_tokens={cap} (long answers game overlap)"
        return listed_hedge(answer, gold.usable, gold.tokens, self._normalize) or hedge_word(
            norm, gold.normalized
        )

    def _verdict(self, details: dict[str, Any]) -> Result:
        mode = self.cfg.mode
        if mode == "f1":
            reward = details["f1"]
            correct = reward >= self.cfg.f1_threshold
        else:
            reward = details["em"] if mode == "em" else details["contains"]
            correct = reward == 1.0
        details["correct"] = bool(correct)
        if reward == 0.0:
            details["reason"] = {
                "em": "no gold alias equals the answer after normalisation",
                "contains": "no gold alias occurs in the answer",
                "f1": "the answer shares no token with any gold alias",
            }[mode]
        return Result(reward=float(reward), details=details)
