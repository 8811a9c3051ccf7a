"""A reward source by name behind a warm :class:`~rewardlab.scoring.Scorer` pool: what every long-lived user
of rewards holds (an RL run, the TRL and verl reward functions, ``rewardlab serve``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rewardlab.scoring.engine import Scorer
from rewardlab.types import Record, Result
from rewardlab.verifiers.sources import build_source, source_kind


class ScorerSource:
    """A source the scoring engine scores (``SourceKind.scored_by_engine``): a verifier or ``http:URL`` (by
    name) behind a warm :class:`Scorer` pool, or a run-only kind (``rm:PATH``, an outcome reward model scored
    in this process) built first; never raises.

    Args:
        name: The source's name (``math``, ``http:URL``, ``rm:PATH``, ...).
        kwargs: The source's settings.
        workers: Worker processes of the pool.
        timeout: Seconds one record may take before it is an error row (``timeout``).
        run: Objects of the run that run-only kinds take (see :func:`build_source`); ``{}`` when there are none.
    """

    def __init__(
        self,
        name: str,
        kwargs: Mapping[str, Any] | None,
        workers: int,
        timeout: float,
        run: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        kwargs = dict(kwargs or {})
        if source_kind(name).run_only:
            # The engine resolves only names a file run may give: a run-only source goes in built.
            built = build_source(name, kwargs, run=run if run is not None else {})
            self.scorer = Scorer(built, workers=workers, timeout=timeout)
            return
        # Large chunks: a batch arrives all at once, and fewer messages to the workers is what matters; the
        # engine still reports (and times out) each item separately.
        self.scorer = Scorer(name, workers=workers, timeout=timeout, config=kwargs or None, chunk_size=64)

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        try:
            return self.scorer.score(records)
        except Exception as exc:  # the engine itself failed: every record is a scored error
            return [Result.failure(f"scoring failed: {type(exc).__name__}: {exc}") for _ in records]

    def close(self) -> None:
        self.scorer.close()
