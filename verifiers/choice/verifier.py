"""``ChoiceVerifier``: 1 when a multiple-choice response's final, unhedged letter is the gold letter.

The response is read after its last ``</think>`` (the reasoning is a draft); its statements of an answer are
found by :mod:`.reading` and the last one decides. The reference gives the gold letter and, optionally, the
options' texts (:mod:`.options`), which bound the letters and let an answer name an option by its text.
docs/choice.md has the decision policy and examples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rewardlab.types import Record, Result
from rewardlab.verifiers.base import Verifier
from rewardlab.verifiers.choice.options import Choices, ReferenceError, parse_choices
from rewardlab.verifiers.choice.reading import Statement, read_statements
from rewardlab.verifiers.response import final_response


@dataclass(frozen=True)
class ChoiceConfig:
    """Settings of :class:`ChoiceVerifier` (keyword arguments of ``get_verifier("choice", ...)``)."""

    letters: int = 10
    """The most options a record may have: 10 reads A-J (MMLU-Pro), 4 reads A-D; at most 26. A record that
    gives its options is bounded by their count instead (never above this)."""
    last_line: bool = True
    """Read a last line that is only a letter ("(B)", "B.", "**B**"), or only an option's text (with or
    without its letter), when no answer cue or box is on it. False: only answer cues and boxes are read."""
    allow_option_text: bool = True
    """When the record gives the options' texts, an answer may name an option by its text ("The answer is
    Glucose."): the whole statement or last line, normalised, must equal one option's text."""
    strip_reasoning: bool = True
    """Read only what follows the last ``</think>``; a response that opens ``<think>`` and never closes it
    has no answer (scores 0). False: read the whole response."""
    correct_reward: float = 1.0
    """Reward of the gold letter."""
    incorrect_reward: float = 0.0
    """Reward of another letter (a refusal, e.g. a hedge or no letter found, is always 0.0)."""

    def __post_init__(self) -> None:
        if isinstance(self.letters, bool) or not isinstance(self.letters, int) or not 2 <= self.letters <= 26:
            raise ValueError(f"letters must be an integer from 2 to 26 (10 = A-J), got {self.letters!r}")
        for name in ("last_line", "allow_option_text", "strip_reasoning"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("correct_reward", "incorrect_reward"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{name} must be a number, got {value!r}")


class ChoiceVerifier(Verifier):
    """Rewards a multiple-choice response whose final statement names the gold letter, and only it.

    ``details``: ``extracted`` (the letter read, or ``None``), ``extracted_span`` (``[start, end)`` in the
    completion text), ``method`` (the form that read it: ``answer_is``, ``is_answer``, ``boxed``,
    ``option_text``, ``last_line_letter``; ``none`` when nothing was found), ``gold``, ``correct``,
    ``options`` (how many letters the record allows) and ``reason`` when the reward is 0.
    """

    name: ClassVar[str] = "choice"
    answer_votes: ClassVar[str | None] = "exact"

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        known = ChoiceConfig.__dataclass_fields__
        unknown = sorted(set(config) - set(known))
        if unknown:
            raise ValueError(f"unknown choice verifier option(s) {unknown} (known: {sorted(known)})")
        self.settings = ChoiceConfig(**config)

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["config"])

    def verify(self, record: Record) -> Result:
        try:
            choices = parse_choices(record.reference, record.metadata, self.settings.letters)
        except ReferenceError as exc:
            return Result.failure(f"bad reference: {exc}")
        text = record.completion_text
        offset, body = self.response_part(text)
        base = {"gold": choices.gold, "options": len(choices.letters)}
        if body is None:
            return self._zero(base, "the reasoning is never closed (no </think>): no final answer")
        statements = read_statements(
            body,
            choices,
            last_line=self.settings.last_line,
            option_text=self.settings.allow_option_text,
        )
        if not statements:
            return self._zero(base, "no answer statement found")
        return self._judge(statements[-1], offset, choices, base)

    def response_part(self, text: str) -> tuple[int, str | None]:
        """Where the read part of ``text`` starts and that part (after the last ``</think>``); ``None`` when
        the reasoning is opened and never closed."""
        return final_response(text) if self.settings.strip_reasoning else (0, text)

    def _judge(self, final: Statement, offset: int, choices: Choices, base: dict[str, Any]) -> Result:
        span = [final.start + offset, final.end + offset]
        details = {**base, "method": final.method, "extracted_span": span}
        if final.letter is None:
            return self._zero(details, final.reason or "the final statement names no option letter")
        details["extracted"] = final.letter
        if final.letter not in choices.letters:
            allowed = f"{choices.letters[0]}-{choices.letters[-1]}"
            return self._zero(
                details, f"letter {final.letter} is not one of the {len(choices.letters)} options ({allowed})"
            )
        correct = final.letter == choices.gold
        details["correct"] = correct
        if not correct:
            details["reason"] = f"read {final.letter}, gold is {choices.gold}"
        reward = self.settings.correct_reward if correct else self.settings.incorrect_reward
        return Result(reward=float(reward), details=details)

    @staticmethod
    def _zero(details: dict[str, Any], reason: str) -> Result:
        details = {"extracted": None, "extracted_span": None, "method": "none", **details}
        details.update(correct=False, reason=reason)
        return Result(reward=0.0, details=details)


__all__ = ["ChoiceConfig", "ChoiceVerifier"]
