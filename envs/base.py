"""The environment interface of multi-turn rollouts: an episode starts from a record, takes the model's
turns, answers each with an observation (a tool's output) or ends.

An :class:`Environment` is a factory of episodes and the one place their rules live; the rollout loop
(``envs/rollout.py``) is the same for every environment. It follows Gymnasium's ``reset`` / ``step`` with
text in and text out, batched: ``step`` sees every running episode's turn at once, so that tools run in
parallel (the Python tool's calls of one turn go to the sandbox as one batch).

The reward is not the environment's business: the episode's answer (:meth:`Environment.answer`, by default
the model's last turn) is scored by the run's reward sources, the same verifiers as single-turn RL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardlab.types import Record

END_ANSWER = "answer"
"""The model's turn called no tool: its text is the answer."""
END_MAX_TURNS = "max_turns"
"""The last allowed turn still called a tool: the episode ends without an answer."""
END_LENGTH = "length"
"""A turn hit the per-turn token limit or the episode's token budget (a truncated episode)."""
END_BUDGET = "budget"
"""The next observation did not fit the episode's token budget (a truncated episode)."""


@dataclass
class Turn:
    """One entry of an episode's transcript."""

    role: str
    """``"model"`` or ``"tool"``."""
    text: str


@dataclass
class EpisodeState:
    """One running episode: its record, transcript and counters. ``data`` is the environment's own state
    (e.g. the Python cells run so far), private to this episode."""

    record: Record
    turns: list[Turn] = field(default_factory=list)
    done: bool = False
    end: str = ""
    """Why it ended: ``answer``, ``max_turns``, ``length``, ``budget`` or an environment's own reason."""
    tool_calls: int = 0
    tool_errors: Counter = field(default_factory=Counter)
    """Failed tool calls by kind (``timeout``, ``error``, ``malformed``, ``unknown_tool``, ...)."""
    tool_seconds: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def model_turns(self) -> list[str]:
        return [t.text for t in self.turns if t.role == "model"]

    @property
    def answered(self) -> bool:
        return self.end == END_ANSWER


@dataclass
class StepResult:
    """An environment's reply to one model turn: the observation shown next, or the end of the episode."""

    observation: str | None = None
    """Text appended after the model's turn (a tool's output); ``None`` with ``done``."""
    done: bool = False
    end: str = ""
    """Why the episode ended (with ``done``)."""


class Environment:
    """Base class of environments. Subclasses implement :meth:`step` (and :meth:`reset` for state).

    Attributes:
        stop: Strings that end a model turn (the closing marker of a tool call), kept in the turn's text.
    """

    name = "base"
    stop: Sequence[str] = ()

    def reset(self, record: Record) -> EpisodeState:
        """A new episode of ``record``."""
        return EpisodeState(record=record)

    def step(self, episodes: Sequence[EpisodeState], turns: Sequence[str], last: bool) -> list[StepResult]:
        """Replies to each episode's latest model turn (already in its transcript). ``last``: no further turn
        is allowed, so nothing needs to run (a tool call then ends the episode without an answer)."""
        raise NotImplementedError

    def answer(self, episode: EpisodeState) -> str:
        """The text the reward sources score: the model's last turn (tool output never counts as the
        model's answer)."""
        turns = episode.model_turns
        return turns[-1] if turns else ""

    def close(self) -> None:
        """Releases sandboxes or connections."""

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
