"""Pre-rollout prompt selection for GRPO-style training, from earlier rollouts of the same prompt.

Training runs several epochs over a fixed prompt set, so every prompt comes back. A group whose rewards are
all equal has zero advantage under GRPO and teaches nothing, yet costs a full rollout. This module decides,
*before* rolling a prompt out, whether to spend a rollout on it, from what its earlier groups showed:

* ``"band"`` -- online difficulty filtering (Bae et al. 2025, "Online Difficulty Filtering for Reasoning
  Oriented Reinforcement Learning", arXiv 2504.03380): keep a prompt whose estimated pass rate lies in
  ``[low, high]``. The paper bounds the expected policy improvement below by the variance of the per-prompt
  success probability, ``p (1 - p)``, which peaks at ``p = 1/2`` and vanishes at 0 and 1.
* ``"greso"`` -- GRESO selective rollout (Zheng et al. 2025, "Act Only When It Pays: Efficient Reinforcement
  Learning for LLM Reasoning via Selective Rollouts", arXiv 2506.02177): skip a prompt whose recent groups
  were zero-variance with a probability that grows with the length of that run, and steer the exploration
  probabilities toward a target zero-variance share.
* ``"none"`` -- keep everything (the state is still tracked, so switching mode on resume works).

Everything is plain Python: the pure rules are functions, :class:`PromptFilter` holds the per-prompt history
and a seeded :class:`random.Random`, and its state dict is JSON-serialisable.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

__all__ = [
    "FILTER_MODES",
    "PromptFilter",
    "adapt_explore_probability",
    "band_keep",
    "classify_group",
    "greso_keep_probability",
]

FILTER_MODES = ("none", "band", "greso")

# Bae et al.'s band. The paper's own text could not be checked here; 0.2 / 0.8 is the band that write-ups
# of it give (DataFlex-RL docs, selector/difficulty_filtering.md: "keep pass-rate in [0.2, 0.8]").
DEFAULT_LOW = 0.2
DEFAULT_HIGH = 0.8
DEFAULT_WINDOW = 1

# GRESO defaults, from the authors' code (github.com/Infini-AI-Lab/GRESO):
# train-scripts/*_greso.sh: data.p_easy=0.5, data.p_hard=0.5, data.target_zero_variance=0.25;
# verl/trainer/ppo/ray_trainer.py: step 0.01, min_p 0.05, max_p 0.95, target split 1/3 easy : 2/3 hard;
# verl/trainer/ttis/presampling_selector.py: keep probability floored at 0.01.
DEFAULT_P_EASY = 0.5
DEFAULT_P_HARD = 0.5
DEFAULT_TARGET_ZERO_VAR = 0.25
DEFAULT_ADJUST_STEP = 0.01
DEFAULT_P_MIN = 0.05
DEFAULT_P_MAX = 0.95
DEFAULT_MIN_KEEP = 0.01
# The reference code lets hard prompts have twice the zero-variance share of easy ones, "more exploration on
# hard examples, because they are more likely to change" as the reward rises (ray_trainer.py).
EASY_TARGET_FRACTION = 1.0 / 3.0

# Pass rates are ratios k/G and means of them; a float rounding must not flip a prompt that sits exactly on
# a band edge, nor make equal rewards look like a non-zero variance.
_TOL = 1e-9
_STATE_VERSION = 1


def band_keep(pass_rate: float | None, low: float, high: float) -> bool:
    """Bae et al. 2025 (arXiv 2504.03380) balanced filter: keep ``x`` iff ``low <= p_hat(x) <= high``.

    ``pass_rate`` is ``None`` for a prompt never rolled out: it has no estimate and is kept.
    """
    if pass_rate is None:
        return True
    return low - _TOL <= pass_rate <= high + _TOL


def greso_keep_probability(
    zero_var_streak: int, p_explore: float, min_keep: float = DEFAULT_MIN_KEEP
) -> float:
    """GRESO (Zheng et al. 2025, arXiv 2506.02177) probability of rolling a prompt out.

    The paper skips prompt ``x_i`` with probability ``p_f(x_i) = 1 - p_e ** z_i``, where ``z_i`` is the
    number of its most recent consecutive zero-variance rollouts, so the keep probability is
    ``max(p_e ** z_i, min_keep)``. The floor (0.01 by default) is the authors' code
    (``presampling_selector.py``: ``skip_probability = 1 - max(p ** count, 0.01)``); it keeps a prompt that
    was zero-variance for a long time from being dropped for good. ``z_i = 0`` gives 1.
    """
    if zero_var_streak < 0:
        raise ValueError(f"zero_var_streak must be >= 0, got {zero_var_streak}")
    return max(p_explore**zero_var_streak, min_keep)


def adapt_explore_probability(
    p: float, zero_var_share: float, target: float, step: float, p_min: float, p_max: float
) -> float:
    """GRESO's self-adjusting exploration probability (arXiv 2506.02177; ``ray_trainer.py`` in its code).

    After each training step, with ``s`` the share of this step's groups that were zero-variance (of the
    kind ``p`` governs: easy or hard)::

        p <- max(p - step, p_min)   if s >= target   (too many useless groups: skip more)
        p <- min(p + step, p_max)   otherwise        (room to explore: skip less)
    """
    if zero_var_share >= target:
        return max(p - step, p_min)
    return min(p + step, p_max)


def classify_group(rewards: Sequence[float], correct: Sequence[bool]) -> str:
    """``"easy"`` (zero variance, all correct), ``"hard"`` (zero variance, not all correct) or ``"mixed"``.

    Zero variance means all rewards equal (GRPO's advantage is then 0 for every sample). A zero-variance group
    with some but not all samples correct is possible only when correctness is not a function of the reward;
    it counts as hard, since the policy does not solve the prompt reliably.
    """
    if not rewards:
        raise ValueError("a group needs at least one reward")
    if max(rewards) - min(rewards) > _TOL:
        return "mixed"
    return "easy" if all(correct) else "hard"


def _rng_state_to_plain(state: tuple) -> list:
    version, internal, gauss_next = state
    return [version, list(internal), gauss_next]


def _rng_state_from_plain(state: Sequence) -> tuple:
    version, internal, gauss_next = state
    return (version, tuple(internal), gauss_next)


class PromptFilter:
    """Decides which prompts to roll out, from the outcomes of their earlier groups.

    Contract with the trainer
    -------------------------
    1. Each step, draw candidate prompt ids in data order and call :meth:`select` on them (one call or
       several chunks); roll out the kept ones; draw more until ``prompts_per_step`` are kept or a cap on
       candidates is reached (all candidates can be rejected, e.g. late in training when most prompts are
       solved, so the loop must be bounded). What to do at the cap (train on fewer prompts, or take
       rejected ones) is the trainer's choice; GRESO itself trains on whatever survives.
    2. After the rollout, call :meth:`observe` **once per training step** with every group rolled out in
       that step: GRESO adapts its probabilities once per call, and the reference code does so once per step.
    3. Skipped prompts are not observed, so their history stays as it was. In ``"band"`` mode with
       ``band_explore=0`` a prompt that left the band is never rolled out again and its estimate never
       refreshes: the band then prunes statically. ``band_explore > 0`` re-checks such prompts.
    4. Decisions use the RNG seeded in ``__init__`` and are a function of (state, candidates in order):
       a run resumed from :meth:`state_dict` that presents the same candidates decides the same.

    Pass-rate estimate (``"band"``)
    -------------------------------
    The mean pass rate of the prompt's last ``window`` groups (default 1, the latest group). The policy
    moves between epochs, so older groups describe an older policy; Bae et al. filter on the freshest
    accuracy (the current rollout). A longer window trades that lag for less noise from small groups.

    GRESO (``"greso"``)
    -------------------
    Each prompt carries the length ``z`` of its current run of zero-variance groups of one kind (easy = all
    correct, hard = all wrong; a change of kind starts a new run, a group with non-zero variance ends it).
    Keep probability: :func:`greso_keep_probability` with ``p_easy`` or ``p_hard``. After each step
    :func:`adapt_explore_probability` moves ``p_easy`` toward an easy share of
    ``target_zero_var * 1/3`` and ``p_hard`` toward ``target_zero_var * 2/3``. The reference code skips
    adaptation in the first epoch (nothing has been filtered yet, so the share says nothing about the
    filter); here a step adapts only when at least one of its prompts had been observed before.
    """

    def __init__(
        self,
        *,
        mode: str,
        low: float = DEFAULT_LOW,
        high: float = DEFAULT_HIGH,
        window: int = DEFAULT_WINDOW,
        band_explore: float = 0.0,
        p_easy: float = DEFAULT_P_EASY,
        p_hard: float = DEFAULT_P_HARD,
        target_zero_var: float = DEFAULT_TARGET_ZERO_VAR,
        adjust_step: float = DEFAULT_ADJUST_STEP,
        p_min: float = DEFAULT_P_MIN,
        p_max: float = DEFAULT_P_MAX,
        min_keep: float = DEFAULT_MIN_KEEP,
        seed: int = 0,
    ) -> None:
        if mode not in FILTER_MODES:
            raise ValueError(f"mode must be one of {FILTER_MODES}, got {mode!r}")
        _check(0.0 <= low <= high <= 1.0, f"need 0 <= low <= high <= 1, got low={low}, high={high}")
        _check(window >= 1, f"window must be >= 1, got {window}")
        _check(0.0 <= band_explore <= 1.0, f"band_explore must be in [0, 1], got {band_explore}")
        _check(0.0 <= p_min <= p_max <= 1.0, f"need 0 <= p_min <= p_max <= 1, got {p_min}, {p_max}")
        _check(0.0 <= target_zero_var <= 1.0, f"target_zero_var must be in [0, 1], got {target_zero_var}")
        _check(adjust_step >= 0.0, f"adjust_step must be >= 0, got {adjust_step}")
        _check(0.0 <= min_keep <= 1.0, f"min_keep must be in [0, 1], got {min_keep}")
        for name, p in (("p_easy", p_easy), ("p_hard", p_hard)):
            _check(0.0 <= p <= 1.0, f"{name} must be in [0, 1], got {p}")
        self.mode = mode
        self.low, self.high, self.window, self.band_explore = low, high, window, band_explore
        self.target_zero_var, self.adjust_step = target_zero_var, adjust_step
        self.p_min, self.p_max, self.min_keep = p_min, p_max, min_keep
        self.p_easy, self.p_hard = p_easy, p_hard
        self._rng = random.Random(seed)
        # prompt id -> {"rates": last `window` pass rates, "kind": "easy" | "hard" | None, "streak": int}
        self._prompts: dict[str, dict[str, Any]] = {}
        self._considered = 0
        self._skipped = 0
        self._easy_share = 0.0
        self._hard_share = 0.0

    # ------------------------------------------------------------------------------------------- decisions

    def pass_rate(self, prompt_id: str) -> float | None:
        """Mean pass rate of the prompt's last ``window`` groups; ``None`` if never observed."""
        record = self._prompts.get(prompt_id)
        if record is None:
            return None
        return sum(record["rates"]) / len(record["rates"])

    def keep_probability(self, prompt_id: str) -> float:
        """Probability that :meth:`select` keeps this prompt in the current state."""
        if self.mode == "none":
            return 1.0
        if self.mode == "band":
            return 1.0 if band_keep(self.pass_rate(prompt_id), self.low, self.high) else self.band_explore
        record = self._prompts.get(prompt_id)
        if record is None or record["streak"] == 0:
            return 1.0
        p = self.p_easy if record["kind"] == "easy" else self.p_hard
        return greso_keep_probability(record["streak"], p, self.min_keep)

    def select(self, candidates: list[str]) -> list[bool]:
        """Which candidates (prompt ids, in sampling order) to roll out."""
        keep = [self._decide(self.keep_probability(pid)) for pid in candidates]
        self._considered += len(keep)
        self._skipped += keep.count(False)
        return keep

    def _decide(self, probability: float) -> bool:
        # No draw for a sure keep: the RNG stream then depends only on the uncertain decisions, which makes
        # mode "none" and unseen prompts free of RNG use.
        if probability >= 1.0:
            return True
        return self._rng.random() < probability

    # ------------------------------------------------------------------------------------------- updates

    def observe(self, prompt_ids: list[str], rewards: list[list[float]], correct: list[list[bool]]) -> None:
        """Record one training step's groups: ``rewards[i]`` / ``correct[i]`` are prompt ``i``'s samples."""
        _check_groups(prompt_ids, rewards, correct)
        if not prompt_ids:
            return
        had_history = any(pid in self._prompts for pid in prompt_ids)
        kinds = [self._update(pid, r, c) for pid, r, c in zip(prompt_ids, rewards, correct, strict=True)]
        self._easy_share = kinds.count("easy") / len(kinds)
        self._hard_share = kinds.count("hard") / len(kinds)
        if self.mode == "greso" and had_history:
            self._adapt()

    def _update(self, prompt_id: str, rewards: Sequence[float], correct: Sequence[bool]) -> str:
        kind = classify_group(rewards, correct)
        record = self._prompts.setdefault(prompt_id, {"rates": [], "kind": None, "streak": 0})
        record["rates"] = ([*record["rates"], sum(map(bool, correct)) / len(correct)])[-self.window :]
        if kind == "mixed":
            record["kind"], record["streak"] = None, 0
        elif kind == record["kind"]:
            record["streak"] += 1
        else:
            record["kind"], record["streak"] = kind, 1
        return kind

    def _adapt(self) -> None:
        easy_target = self.target_zero_var * EASY_TARGET_FRACTION
        hard_target = self.target_zero_var - easy_target
        bounds = (self.adjust_step, self.p_min, self.p_max)
        self.p_easy = adapt_explore_probability(self.p_easy, self._easy_share, easy_target, *bounds)
        self.p_hard = adapt_explore_probability(self.p_hard, self._hard_share, hard_target, *bounds)

    # ------------------------------------------------------------------------------------------- reporting

    def metrics(self) -> dict[str, float]:
        """Counters since the last call (then reset) and the current state, under ``prompt_filter/``."""
        out = {
            "prompt_filter/considered": float(self._considered),
            "prompt_filter/skipped": float(self._skipped),
            "prompt_filter/skipped_frac": self._skipped / self._considered if self._considered else 0.0,
            "prompt_filter/p_easy": float(self.p_easy),
            "prompt_filter/p_hard": float(self.p_hard),
            "prompt_filter/known_prompts": float(len(self._prompts)),
            "prompt_filter/easy_share": self._easy_share,
            "prompt_filter/hard_share": self._hard_share,
        }
        self._considered = self._skipped = 0
        return out

    def state_dict(self) -> dict[str, Any]:
        """Plain-Python (JSON-serialisable) state: per-prompt history, probabilities, counters, RNG."""
        return {
            "version": _STATE_VERSION,
            "mode": self.mode,
            "p_easy": self.p_easy,
            "p_hard": self.p_hard,
            "prompts": {pid: {**rec, "rates": list(rec["rates"])} for pid, rec in self._prompts.items()},
            "considered": self._considered,
            "skipped": self._skipped,
            "easy_share": self._easy_share,
            "hard_share": self._hard_share,
            "rng": _rng_state_to_plain(self._rng.getstate()),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; hyperparameters stay those given to ``__init__``."""
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"unknown prompt filter state version {state.get('version')!r}")
        self.p_easy, self.p_hard = float(state["p_easy"]), float(state["p_hard"])
        self._prompts = {
            pid: {
                "rates": list(rec["rates"])[-self.window :],
                "kind": rec["kind"],
                "streak": int(rec["streak"]),
            }
            for pid, rec in state["prompts"].items()
        }
        self._considered, self._skipped = int(state["considered"]), int(state["skipped"])
        self._easy_share, self._hard_share = float(state["easy_share"]), float(state["hard_share"])
        self._rng.setstate(_rng_state_from_plain(state["rng"]))


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _check_groups(prompt_ids: list[str], rewards: list[list[float]], correct: list[list[bool]]) -> None:
    _check(
        len(prompt_ids) == len(rewards) == len(correct),
        f"got {len(prompt_ids)} prompt ids, {len(rewards)} reward groups, {len(correct)} correctness groups",
    )
    for pid, r, c in zip(prompt_ids, rewards, correct, strict=True):
        _check(
            len(r) > 0 and len(r) == len(c), f"prompt {pid!r}: {len(r)} rewards vs {len(c)} correctness flags"
        )
