"""Label-free rewards for RL on unlabeled math prompts: TTRL's majority vote.

Zuo et al. 2025, "TTRL: Test-Time Reinforcement Learning" (arXiv 2504.16084): sample a group of completions
per prompt, extract each final answer, take the most common answer as the pseudo-label, and reward 1 to the
samples whose answer equals it, else 0. Here "equals" is the math verifier's equivalence, so ``0.5``, ``1/2``
and ``\\frac{1}{2}`` vote together, and answers are read with the math verifier's extraction and decision
policy (docs/math.md): a cut-off, retracted, hedged or ambiguous answer is no answer.

Rules where TTRL leaves a choice (its reference code, ``verl/trainer/ppo/ttrl_utils.py::_majority_vote`` in
PRIME-RL/TTRL, keeps the answered samples, takes ``Counter.most_common(1)`` and reports the label's count over
*all* samples as ``majority_ratio``):

- **Missing answers** get reward 0 and do not vote (as TTRL, which drops ``None`` before counting).
- **Vote share** is the label's votes over the whole group, answered or not (TTRL's ``majority_ratio``), so a
  group where most samples give no answer has a weak label.
- **Ties** between the top answers give no label, and every sample of the group reward 0. TTRL states no tie
  rule: its code keeps whichever tied answer was sampled first, an accident of order. This project's rule is
  that a false positive is a reward hack, so when in doubt the reward is 0.
- **min_share** (not in TTRL; 0 reproduces it): no label when the top answer's vote share is below it.

:class:`MajorityVoteSource` is a reward source for the RL loop (``score_batch`` / ``name`` / ``close``, as
:class:`rewardlab.verifiers.python.CallableSource`); :func:`majority_vote_rewards` is the vote itself, pure.
The ``ttrl`` and ``self_certainty`` kinds of reward-source name that build these sources are registered
in :mod:`rewardlab.rl.sources`, lazily, so that resolving names does not import this module's math-verify.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from math_verify.errors import TimeoutException

from rewardlab.types import Record, Result
from rewardlab.verifiers.math.answer import Candidate
from rewardlab.verifiers.math.verifier import MathVerifier, _Answer

__all__ = ["MajorityVoteSource", "majority_vote_rewards", "math_equivalent"]

Equivalence = Callable[[str, str], bool]


# ----------------------------------------------------------------------------------------------------------
# The vote
# ----------------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _default_verifier() -> MathVerifier:
    return MathVerifier()


def _as_answer(text: str) -> _Answer:
    """``text`` read as the content of a ``\\boxed{}`` (the verifier's normal form of one stated answer)."""
    return _Answer.of(Candidate(text, "boxed", 0, len(text)))


def math_equivalent(a: str, b: str) -> bool:
    """Whether two answer texts are the same math answer, by :meth:`MathVerifier.compare` (default settings)
    both ways: the comparison of an answer with a gold is not symmetric (``50\\%`` against gold ``50`` is
    refused, ``50`` against gold ``50\\%`` accepted), and a vote must not depend on which came first.

    ``rewardlab eval``'s maj@k keeps its own rule (:func:`rewardlab.verifiers.math.group_answers`): it asks
    :func:`rewardlab.verifiers.math.equivalent` one way (the class's first answer as the gold) and groups
    plain numbers by value, percent sign aside, before any comparison, so there ``50\\%`` and ``50`` are
    one answer, here two (docs/eval.md, maj@k)."""
    return _mutually_equal(_default_verifier(), _as_answer(a), _as_answer(b))


def _mutually_equal(verifier: MathVerifier, a: _Answer, b: _Answer) -> bool:
    return verifier.compare(a, b)[0] and verifier.compare(b, a)[0]


def _same(equivalent: Equivalence, rep: str, text: str) -> bool:
    """``equivalent(rep, text)``; a crash or timeout is "not the same" (a split vote only lowers rewards)."""
    try:
        return bool(equivalent(rep, text))
    except (Exception, TimeoutException):
        return False


def _clusters(texts: Sequence[str], equivalent: Equivalence) -> list[list[int]]:
    """Indices of ``texts`` grouped greedily: each text joins the first cluster whose first text it equals.

    Identical texts are compared once, so a group of G answers with D distinct texts and C clusters costs at
    most D * C comparisons (<= G^2)."""
    reps: list[str] = []
    members: list[list[int]] = []
    cluster_of: dict[str, int] = {}
    for i, text in enumerate(texts):
        k = cluster_of.get(text)
        if k is None:
            k = next((j for j, rep in enumerate(reps) if _same(equivalent, rep, text)), len(reps))
            if k == len(reps):
                reps.append(text)
                members.append([])
            cluster_of[text] = k
        members[k].append(i)
    return members


def _vote(
    answers: Sequence[str | None], equivalent: Equivalence, min_share: float
) -> tuple[str | None, float, set[int]]:
    """One group's (pseudo-label, top answer's vote share, indices that agree with the label).

    The share is over all samples of the group; a tie or a share below ``min_share`` gives no label (module
    docstring). The label is the winning cluster's most common surface form."""
    voters = [i for i, a in enumerate(answers) if a is not None]
    clusters = _clusters([answers[i] for i in voters], equivalent)
    if not clusters:
        return None, 0.0, set()
    sizes = sorted((len(c) for c in clusters), reverse=True)
    share = sizes[0] / len(answers)
    if len(sizes) > 1 and sizes[1] == sizes[0]:
        return None, share, set()
    if share < min_share:
        return None, share, set()
    best = max(clusters, key=len)
    winners = {voters[j] for j in best}
    label = Counter(answers[i] for i in sorted(winners)).most_common(1)[0][0]
    return label, share, winners


def _check_share(min_share: float) -> None:
    if not 0.0 <= min_share <= 1.0:
        raise ValueError(f"min_share must be in [0, 1], got {min_share}")


def majority_vote_rewards(
    answers: Sequence[str | None],
    groups: Sequence[Hashable],
    *,
    min_share: float = 0.0,
    equivalent: Equivalence = math_equivalent,
) -> tuple[list[float], list[str | None], list[float]]:
    """TTRL's majority-vote reward (Zuo et al. 2025, arXiv 2504.16084): per sample, 1.0 if its answer is
    equivalent to its group's most common answer, else 0.0.

    Args:
        answers: Each sample's extracted answer; ``None``: no answer (reward 0, no vote).
        groups: Each sample's group (the samples of one prompt); any order, groups interleaved.
        min_share: No label when the top answer's votes over the group's samples (answered or not) are fewer
            than this share of the group.
        equivalent: Whether two answers are the same (default: the math verifier's equivalence).

    Returns:
        Per sample: the reward, its group's pseudo-label (``None``: no answer, a tie, or below
        ``min_share``), and the top answer's vote share (reported even when it is no label, to show why).

    Raises:
        ValueError: ``answers`` and ``groups`` differ in length, or ``min_share`` is outside [0, 1].
    """
    if len(answers) != len(groups):
        raise ValueError(f"{len(answers)} answers for {len(groups)} group ids")
    _check_share(min_share)
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    rewards = [0.0] * len(answers)
    labels: list[str | None] = [None] * len(answers)
    shares = [0.0] * len(answers)
    for idx in members.values():
        label, share, winners = _vote([answers[i] for i in idx], equivalent, min_share)
        for j, i in enumerate(idx):
            rewards[i] = 1.0 if j in winners else 0.0
            labels[i], shares[i] = label, share
    return rewards, labels, shares


# ----------------------------------------------------------------------------------------------------------
# The reward source
# ----------------------------------------------------------------------------------------------------------
def read_final_answer(
    verifier: MathVerifier, completion: str, prompt: str = ""
) -> tuple[_Answer | None, str]:
    """The completion's answer as the math verifier reads it, or ``None`` and why it has none.

    The same steps as :meth:`MathVerifier.verify` before it compares with a gold answer: a cut-off, negated,
    retracted, hedged, malformed or self-contradicting answer is refused (docs/math.md, "Decision policy"),
    because a voting sample that retracts its answer must not be rewarded for it."""
    reading = verifier.read(completion, prompt)
    if reading.answer is None:
        return None, "no answer found" + (f": {reading.problem}" if reading.problem else "")
    pred = _Answer.of(reading.answer)
    problem = verifier.refusal(reading, pred)
    if problem:
        return None, f"answer refused: {problem}"
    return pred, "answer found"


def _group_of(record: Record) -> Hashable:
    """The record's group: ``metadata["group"]`` (set by the RL trainer), else its prompt text."""
    group = (record.metadata or {}).get("group")
    if group is None:
        return record.prompt_text
    return group if isinstance(group, Hashable) else repr(group)


class MajorityVoteSource:
    """TTRL's majority vote (Zuo et al. 2025, arXiv 2504.16084) as an RL reward source: no reference needed.

    Each group (``metadata["group"]``, else the prompt) votes with its samples' final answers, read and
    compared by the math verifier; a sample earns 1.0 when its answer is equivalent to the group's unique most
    common answer, whose vote share is at least ``min_share``, else 0.0 (rules: module docstring).
    ``details["correct"]`` is that agreement (the RL loop's verdict). Never raises on a completion.

    Args:
        min_share: The top answer's minimum share of its group's samples for it to be a label.
        mode: The math verifier's extraction mode; ``strict`` (only ``\\boxed{}``) as TTRL, which reads the
            last box.
        **math_settings: Other :class:`rewardlab.verifiers.math.MathConfig` settings (``float_rounding``,
            ``rel_tol``, ...).
    """

    name = "ttrl"

    def __init__(self, *, min_share: float = 0.0, mode: str = "strict", **math_settings: Any) -> None:
        _check_share(min_share)
        self.min_share = min_share
        self.verifier = MathVerifier(mode=mode, **math_settings)

    def _read(self, record: Record) -> tuple[_Answer | None, str]:
        try:
            return read_final_answer(self.verifier, record.completion_text, record.prompt_text)
        except (Exception, TimeoutException) as exc:  # one bad completion is one sample without an answer
            return None, f"extraction failed: {type(exc).__name__}: {exc}"

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        readings = [self._read(r) for r in records]
        # The vote compares texts; each text stands for the first sample that wrote it (same text, same
        # answer), so the verifier compares its parsed forms and its verdict cache applies.
        forms: dict[str, _Answer] = {}
        for pred, _ in readings:
            if pred is not None:
                forms.setdefault(pred.raw, pred)
        answers = [pred.raw if pred is not None else None for pred, _ in readings]
        groups = [_group_of(r) for r in records]
        rewards, labels, shares = majority_vote_rewards(
            answers,
            groups,
            min_share=self.min_share,
            equivalent=lambda a, b: _mutually_equal(self.verifier, forms[a], forms[b]),
        )
        sizes = Counter(groups)
        return [
            self._result(pred, why, reward, label, share, sizes[g])
            for (pred, why), reward, label, share, g in zip(
                readings, rewards, labels, shares, groups, strict=True
            )
        ]

    def _result(
        self, pred: _Answer | None, why: str, reward: float, label: str | None, share: float, size: int
    ) -> Result:
        details: dict[str, Any] = {
            "extracted": None if pred is None else pred.raw,
            "extracted_by": None if pred is None else pred.extracted_by,
            "normalized": None if pred is None else pred.normalized,
            "pseudo_label": label,
            "vote_share": share,
            "group_size": size,
            "correct": reward > 0,
            "reason": self._reason(pred, why, reward, label, share),
        }
        # No answer is a failure like the math verifier's (counted by the RL loop); a refused one is a 0.
        error = why if pred is None and not why.startswith("answer refused") else None
        return Result(reward=reward, details=details, error=error)

    def _reason(self, pred: _Answer | None, why: str, reward: float, label: str | None, share: float) -> str:
        if pred is None:
            return why
        if reward > 0:
            return "agrees with the majority answer"
        if label is not None:
            return "disagrees with the majority answer"
        if share < self.min_share:
            return f"no pseudo-label: top answer's vote share {share:.3g} is below min_share {self.min_share}"
        return "no pseudo-label: the top answers are tied"

    def close(self) -> None:
        pass


class SelfCertaintySource:
    """Self-certainty as a reward source (INTUITOR, Zhao et al., 2025, "Learning to Reason without External
    Rewards"): each sample's reward is the mean ``KL(U || p_t)`` of the sampling policy's next-token
    distributions over its completion (:func:`rewardlab.core_algos.self_certainty`); no reference answer
    is read. The scores come from ``score_fn(records)``, which the RL trainer provides (a forward pass of the
    model that sampled them), so the source only exists inside a run.

    Its failure mode is the one label-free rewards share: the policy can raise its certainty on wrong
    answers as readily as on right ones (collapse to a confident wrong answer), which
    ``bench/algorithms.py`` measures against the verifier's verdict.
    """

    name = "self_certainty"

    def __init__(self, score_fn: Callable[[Sequence[Record]], Sequence[float]]) -> None:
        self.score_fn = score_fn

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        try:
            values = list(self.score_fn(records))
        except Exception as exc:  # a failed forward pass is an error per sample, never a dead run
            return [Result.failure(f"self-certainty failed: {type(exc).__name__}: {exc}") for _ in records]
        return [Result(reward=float(v), details={"self_certainty": float(v)}) for v in values]

    def close(self) -> None:
        pass
