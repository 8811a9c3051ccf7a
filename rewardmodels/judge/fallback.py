"""A rule verifier with an LLM judge behind it for the answers the rules cannot decide.

``FallbackVerifier(primary="math", judge=judge)`` scores every record with the rule verifier first; only
the records it returns an *error* for (no answer it can parse, a parse failure, a timeout: the verifier
could not decide) go to the judge, prompted with the ``math_equivalence`` template in ``binary`` mode (is
the final answer equivalent to the reference?). ``details["decided_by"]`` says which one decided
(``"math"`` or ``"judge"``), and ``details["primary"]`` keeps what the rule verifier said. A record the
judge cannot decide either keeps an error result naming both reasons.

Decided rule results (right or wrong) are never sent to the judge: the rules are exact where they apply,
and the judge costs a generation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rewardlab.rewardmodels.judge.judge import LLMJudge
from rewardlab.types import Record, Result
from rewardlab.verifiers import get_verifier


def _undecided(result: Result) -> bool:
    return result.error is not None


class FallbackVerifier:
    """Rule verifier first, LLM judge for what it cannot decide (a reward source).

    Args:
        primary: A verifier name (``"math"``) or any object with ``score_batch`` (and ``name``).
        judge: An :class:`~rewardlab.rewardmodels.judge.judge.LLMJudge` (``binary`` mode, ideally with the
            ``math_equivalence`` template), or ``None`` to build one from ``judge_model``.
        judge_model: Model path / hub name for a judge built here.
        judge_kwargs: :class:`~rewardlab.rewardmodels.judge.judge.JudgeConfig` fields and ``backend`` for a
            judge built here.
        primary_config: Keyword arguments of the primary verifier when given by name.
        undecided: Which primary results go to the judge (default: those with an error).
    """

    def __init__(
        self,
        primary: Any = "math",
        judge: Any = None,
        *,
        judge_model: str | None = None,
        judge_kwargs: dict[str, Any] | None = None,
        primary_config: dict[str, Any] | None = None,
        undecided: Callable[[Result], bool] = _undecided,
    ) -> None:
        if isinstance(primary, str):
            primary = get_verifier(primary, **(primary_config or {}))
        self.primary = primary
        self.primary_name = getattr(primary, "name", type(primary).__name__)
        if judge is None and judge_model is not None:
            kwargs = {"mode": "binary", "template": "math_equivalence", **(judge_kwargs or {})}
            judge = LLMJudge(judge_model, **kwargs)
        self.judge = judge
        self.undecided = undecided
        self.name = f"{self.primary_name}+judge"

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        """Scores with the primary verifier, then sends its undecided records to the judge."""
        primary_results = list(self.primary.score_batch(records))
        out: list[Result] = []
        pending: list[int] = []
        for i, result in enumerate(primary_results):
            if self.judge is not None and self.undecided(result):
                pending.append(i)
                out.append(result)
                continue
            details = dict(result.details)
            details["decided_by"] = self.primary_name if not self.undecided(result) else None
            out.append(Result(reward=result.reward, details=details, error=result.error))
        if pending:
            judged = self.judge.score_batch([records[i] for i in pending])
            for i, jres in zip(pending, judged, strict=False):
                prim = primary_results[i]
                primary_info = {"error": prim.error, "details": prim.details}
                if jres.error is None:
                    details = {**jres.details, "decided_by": "judge", "primary": primary_info}
                    out[i] = Result(reward=jres.reward, details=details)
                else:
                    out[i] = Result.failure(
                        f"undecided: {prim.error}; judge: {jres.error}",
                        decided_by=None,
                        primary=primary_info,
                        judge=jres.details,
                    )
        return out

    def score(self, record: Record) -> Result:
        return self.score_batch([record])[0]

    def usage(self) -> dict[str, int] | None:
        """The judge's server usage (``None`` for a local judge)."""
        usage = getattr(self.judge, "usage", None)
        return usage() if callable(usage) else None


__all__ = ["FallbackVerifier"]
