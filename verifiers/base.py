"""The verifier interface: ``score(record) -> Result`` that never raises, and a batch path."""

from __future__ import annotations

import traceback
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from rewardlab.types import Record, Result


@runtime_checkable
class RewardSource(Protocol):
    """Anything that turns records into results: a verifier, a reward model, a judge, a weighted sum."""

    name: str

    def score_batch(self, records: Sequence[Record]) -> list[Result]: ...


def verifier_error(exc: BaseException) -> Result:
    """The failure row of a verifier that raised: reward 0, ``error`` naming the exception in one line."""
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return Result.failure(f"verifier error: {last}")


def group_texts(answers: Sequence[str | None]) -> list[int | None]:
    """Classes of answers that are the same text, case and spacing aside (a multiple-choice letter, a short
    answer), ids in order of first appearance; ``None`` stays ``None``."""
    ids: dict[str, int] = {}
    return [None if a is None else ids.setdefault(" ".join(a.lower().split()), len(ids)) for a in answers]


class Verifier(ABC):
    """Base class of rule-based verifiers.

    Subclasses implement :meth:`verify`; callers use :meth:`score` / :meth:`score_batch`, which turn any
    exception into a ``Result`` with reward 0 and an ``error``, so a completion can never crash a run.
    ``config`` holds the keyword arguments the verifier was built with; it must be picklable so that
    worker processes can rebuild the verifier.
    """

    name: ClassVar[str] = "verifier"
    runs_in_process: ClassVar[bool] = False
    """How the scoring engine (``rewardlab.scoring``) runs this source. ``False`` (rule verifiers): records are
    sent in small batches to the engine's worker processes, which kill an item that overruns the per-item
    timeout. ``True``: the engine calls :meth:`score_batch` directly in the calling process with whole
    batches and adds no pool (for sources that are heavy or sandbox themselves: a code verifier running its
    own subprocesses, a reward model batching on a GPU); such a source enforces its own timeouts. Objects
    that are not ``Verifier`` subclasses are run in process unless they set ``runs_in_process = False``."""

    answer_votes: ClassVar[str | None] = None
    """How ``rewardlab eval``'s maj@k groups the answers this verifier reports (``details["extracted"]``):
    ``"math"`` (math equivalence), ``"exact"`` (equal text, case and spacing aside), ``None`` (no maj@k).
    The grouping itself is :meth:`group_answers`."""

    def __init__(self, **config: Any) -> None:
        self.config = config

    @classmethod
    def summary_tallies(cls) -> dict[str, Any]:
        """Fresh running summaries that ``rewardlab score`` adds to its summary when this verifier is the
        run's default source: ``key -> object`` with ``add(row)``, ``to_dict()`` and ``format()`` (see
        :class:`rewardlab.scoring.summary.Summary`). None by default; IFEval reports its four accuracies."""
        return {}

    @classmethod
    def group_answers(cls, answers: Sequence[str | None]) -> list[int | None]:
        """maj@k's classes of this verifier's extracted answers (``None``: no answer, no vote), ids in order
        of first appearance. Here :func:`group_texts` (``answer_votes="exact"``); the math verifier
        overrides it with math equivalence."""
        return group_texts(answers)

    @abstractmethod
    def verify(self, record: Record) -> Result:
        """Scores one record. May raise; :meth:`score` catches."""

    def score(self, record: Record) -> Result:
        try:
            result = self.verify(record)
        except Exception as exc:  # a verifier never raises on a completion
            return verifier_error(exc)
        if not isinstance(result, Result):
            return Result.failure(
                f"verifier error: {type(self).__name__}.verify returned {type(result).__name__}"
            )
        return result

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        """Scores many records. Subclasses override when batching pays (shared gold parsing, models)."""
        return [self.score(record) for record in records]

    def __call__(self, record: Record) -> Result:
        return self.score(record)
