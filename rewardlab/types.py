"""Core data types: what a reward source reads (:class:`Record`) and what it returns (:class:`Result`)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

RECORD_FIELDS = ("id", "prompt", "completion", "reference", "verifier", "metadata")


@dataclass
class Record:
    """One item to score.

    Attributes:
        id: Stable identifier of the row (the input line number when the input has none).
        prompt: The prompt the completion answers (a string, or a list of chat messages).
        completion: The model output to score (a string, or a list of chat messages: the last
            assistant message is scored).
        reference: What the verifier checks against: a gold answer string for math, tests for code,
            a gold query and database for SQL, instruction ids and kwargs for IFEval.
        verifier: Name of the verifier for this row; ``None`` uses the run's default.
        metadata: Anything else carried along (subset, level, source, ...).
    """

    id: Any = None
    prompt: Any = ""
    completion: Any = ""
    reference: Any = None
    verifier: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, row: dict[str, Any], *, field_map: dict[str, str] | None = None) -> Record:
        """Builds a record from a row, mapping differently named columns through ``field_map``.

        ``field_map`` maps record field -> row key, e.g. ``{"reference": "answer"}``. Unknown keys are
        kept in ``metadata`` so nothing in the row is lost.
        """
        field_map = field_map or {}
        values: dict[str, Any] = {}
        used = set()
        for name in RECORD_FIELDS:
            key = field_map.get(name, name)
            if key in row:
                values[name] = row[key]
                used.add(key)
        metadata = _as_metadata(values.pop("metadata", None))
        for key, value in row.items():
            if key not in used and key not in metadata:
                metadata[key] = value
        return cls(**values, metadata=metadata)

    @property
    def completion_text(self) -> str:
        """The completion as plain text (the last message's content for chat-format completions)."""
        return message_text(self.completion)

    @property
    def prompt_text(self) -> str:
        """The prompt as plain text (messages joined by newlines for chat-format prompts)."""
        return message_text(self.prompt, every=True)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _as_metadata(value: Any) -> dict[str, Any]:
    """A row's ``metadata`` column as a dict: JSON text is decoded (LiveCodeBench stores it so), any other
    non-dict value is kept under ``metadata["metadata"]``."""
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict):
            return decoded
    return {"metadata": value}


def message_text(value: Any, *, every: bool = False) -> str:
    """Text of a prompt or completion given as a string, a chat message dict, or a list of messages: of a
    list, the last message's (what a verifier scores), or with ``every`` all messages' joined by newlines
    (a prompt's text, the plain text a reward model reads)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return str(value.get("content", ""))
    if isinstance(value, list):
        if every:
            return "\n".join(message_text(m) for m in value)
        return message_text(value[-1]) if value else ""
    return str(value)


@dataclass
class Result:
    """The outcome of scoring one record.

    Attributes:
        reward: The reward. Failures (no answer, crash, timeout) are 0.0 with ``error`` set. ``None`` (with
            no error) is a missing reward: the source has no reward for this record, so an RL step leaves the
            sample out of the loss and an output file writes ``"reward": null``; the scoring engine reads a NaN
            reward the same way.
        details: What was extracted, what was compared and how: enough to tell why the reward is what it is.
        error: ``None`` when scoring worked; else a short reason (``"timeout"``, ``"no answer found"``...).
            Errors are kinds, not tracebacks: the summary groups rows by the text before the first colon.
        time_s: Seconds this record took to score (the reward time), set by the scoring engine (a source
            scoring a batch may set it per record); ``None`` when nobody measured it. Not compared: the same
            verdict reached faster is the same result.
    """

    reward: float | None = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    time_s: float | None = field(default=None, compare=False)

    @classmethod
    def failure(cls, error: str, **details: Any) -> Result:
        return cls(reward=0.0, details=details, error=error)

    def to_dict(self) -> dict[str, Any]:
        return {"reward": self.reward, "details": self.details, "error": self.error}


def as_reward(value: Any) -> float | None:
    """A source's reward as a float, or ``None`` for a missing reward (``None`` or NaN).

    Raises:
        TypeError, ValueError: ``value`` is not a number.
    """
    if value is None:
        return None
    reward = float(value)
    return None if math.isnan(reward) else reward


def result_reward(result: Result) -> float | None:
    """A result's reward as it counts: a failure's reward is what it reported, or 0 when that is missing
    (never "missing"); ``None`` / NaN without an error is a missing reward.

    Raises:
        TypeError, ValueError: the reward is not a number.
    """
    reward = as_reward(result.reward)
    if reward is None and result.error is not None:
        return 0.0
    return reward


_ANSWER_KEYS = ("extracted_answer", "extracted", "prediction", "pred", "answer")


def details_answer(details: dict[str, Any]) -> str | None:
    """The answer a verifier's ``details`` report it extracted from the completion, if any (eval's majority
    vote, RL's ``rollouts.jsonl``)."""
    for key in _ANSWER_KEYS:
        value = details.get(key)
        if isinstance(value, dict):
            value = value.get("completion") or value.get("text")
        if isinstance(value, (list, tuple)):
            value = value[-1] if value else None
        if value not in (None, ""):
            return str(value)
    extraction = details.get("completion")
    if isinstance(extraction, dict):
        for key in ("extracted", "answer", "text", "raw"):
            if extraction.get(key) not in (None, ""):
                return str(extraction[key])
    return None


INVALID_LINE_KINDS = ("invalid JSON", "invalid UTF-8")
"""Error kinds of an input line that is not a row (the message is ``"<kind> at line N"``)."""


def error_kind(error: str | None) -> str | None:
    """The kind of an error message: the text before the first colon (``"timeout"``, ``"invalid JSON"``)."""
    if error is None:
        return None
    head = error.split(":", 1)[0].strip()
    kind = head.split(" at line", 1)[0]
    if kind in INVALID_LINE_KINDS:
        return kind
    return head or "error"


def jsonable(value: Any) -> Any:
    """``value`` made JSON-serialisable (sets to sorted lists, unknown objects to ``str``)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        pass
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=repr)
    if hasattr(value, "item"):
        try:
            return value.item()
        except Exception:
            pass
    return str(value)
