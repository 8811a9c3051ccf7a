"""Curricula (``algorithm.curriculum``): which prompts the RL run trains on next, decided from the rewards.

Each method is a small pure rule (a function of plain numbers, checked against its authors' code in
``tests/test_curriculum_formulas.py``) and a :class:`Curriculum` that holds its state: a JSON-serialisable
dict that resumes exactly. A curriculum draws prompt indices from the run's pool (its rank's shard under data
parallelism); the prompt filter (``algorithm.prompt_filter``) then decides which of those to roll out.

====================  ==========================================================================================
name                  rule
====================  ==========================================================================================
``none``              the seeded epoch order (uniform sampling)
``adarft``            AdaRFT (Shi et al. 2025, arXiv 2504.05520): a target difficulty ``T`` moves with the batch's
                      mean reward, ``T <- clip(T + eta tanh(alpha (R - beta)), d_min, d_max)``; the batch is the
                      prompts nearest ``T``
``dump``              DUMP (Wang et al. 2025, arXiv 2504.09710): per source, the mean |advantage| of its last 300
                      samples plus a UCB bonus; a softmax at temperature 0.1 over sources; a source per prompt
``sec``               SEC (Chen et al. 2025, arXiv 2505.14970): a bandit over arms (sources or difficulty levels),
                      reward = mean |advantage| of the arm's samples in the batch, ``Q <- (1 - lr) Q + lr r``
                      (arms not drawn get r = 0, as the authors' code), Boltzmann sampling
``vcrl``              VCRL (Jiang et al. 2025, arXiv 2509.19803): a prompt's score ``p = var / var_max`` of its
                      group's rewards; prompts with ``p >= threshold`` go to a memory bank that is replayed
``reverse``           R^3 (Xi et al. 2024, arXiv 2402.05808): the rollout starts from a prefix of a correct
                      demonstration, shorter at each stage (or, as the authors' released data, a mix of all)
``guided_hints``      GHPO (Liu et al. 2025, arXiv 2507.10628): a group that solved nothing is re-sampled with
                      25%, then 50%, then 75% of the reference solution as a hint
====================  ==========================================================================================

Advantages here are the group-normalised rewards (GRPO's advantage, unbiased std as ``torch.std``), computed
from the rewards whatever the run's estimator, as DUMP's and SEC's code read them under GRPO.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rewardlab.registry import Registry

__all__ = [
    "CURRICULA",
    "HINT_INTRO",
    "Curriculum",
    "GroupOutcome",
    "PoolItem",
    "adarft_select",
    "adarft_target",
    "boltzmann",
    "build_curriculum",
    "cut_solution",
    "dump_ucb_scores",
    "group_abs_advantages",
    "hinted_prompt",
    "sec_update",
    "softmax",
    "solution_steps",
    "vcrl_score",
]

CURRICULA: Registry[type] = Registry("curriculum")

# GHPO's hint sentence (src/ghpo/ghpo_trainer.py), appended to the user message before the solution's start.
HINT_INTRO = "\n The following text is the beginning part of the answer, which you can refer to for solving the problem:\n"


# ------------------------------------------------------------------------------------------------ pure rules


def adarft_target(
    target: float, mean_reward: float, *, eta: float, alpha: float, beta: float, d_min: float, d_max: float
) -> float:
    """AdaRFT's update (arXiv 2504.05520, eq. 1; ``custom_sampler.py``/``ray_trainer.py`` of its code):
    ``T' = clip(T + eta * tanh(alpha * (R_avg - beta)), d_min, d_max)``."""
    return min(max(target + eta * math.tanh(alpha * (mean_reward - beta)), d_min), d_max)


def adarft_select(
    difficulties: Sequence[float], target: float, count: int, rng: random.Random | None = None
) -> list[int]:
    """The ``count`` indices whose difficulty is nearest ``target`` (AdaRFT's ``argsort(|d - T|)[:B]``). Ties
    come in index order, or in ``rng``'s order when given: the authors' numpy quicksort leaves them
    unspecified, which on their 0-100 difficulties rarely matters, but on a few levels (MATH's 1-5) every
    prompt of a level ties, and index order would train on the same first ``count`` prompts at every step."""
    tie_break = list(range(len(difficulties)))
    if rng is not None:
        rng.shuffle(tie_break)
    order = sorted(range(len(difficulties)), key=lambda i: (abs(difficulties[i] - target), tie_break[i]))
    return order[:count]


def group_abs_advantages(rewards: Sequence[float], eps: float = 1e-6) -> list[float]:
    """|GRPO advantage| of each sample of one group: ``|r_i - mean| / (std + eps)``, unbiased std (0 for a
    group of equal rewards, one sample included)."""
    n = len(rewards)
    if max(rewards) == min(rewards):  # exactly 0, as the trainer's GRPO (a float mean may be off by an ulp)
        return [0.0] * n
    mean = sum(rewards) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (n - 1)) if n > 1 else 0.0
    return [abs(r - mean) / (std + eps) for r in rewards]


def dump_ucb_scores(
    mean_abs_adv: Sequence[float], counts: Sequence[int], *, exploration: float = 1.0
) -> list[float]:
    """DUMP's per-source UCB score (``verl/utils/curriculum_learning.py``):
    ``mu_j + c * sqrt(2 ln(N + 1) / (n_j + 1))`` with ``N = max(1, sum_j n_j)`` samples seen in all."""
    total = max(1, sum(counts))
    return [
        m + exploration * math.sqrt(2 * math.log(total + 1) / (n + 1))
        for m, n in zip(mean_abs_adv, counts, strict=True)
    ]


def softmax(scores: Sequence[float], temperature: float) -> list[float]:
    """``exp((s - max s) / tau)``, normalised."""
    top = max(scores)
    exps = [math.exp((s - top) / temperature) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def boltzmann(q_values: Sequence[float], temperature: float) -> list[float]:
    """SEC's sampling probabilities, ``exp(Q / tau) / sum exp(Q / tau)`` (``priority.py``)."""
    return softmax(q_values, temperature)


def sec_update(q_values: Sequence[float], rewards: Sequence[float | None], lr: float) -> list[float]:
    """SEC's TD(0) step (``priority.py``): ``Q <- (1 - lr) Q + lr r``; an arm not drawn this batch
    (``None``) gets ``r = 0``, as the authors' code does, so its value decays."""
    return [(1 - lr) * q + lr * (r or 0.0) for q, r in zip(q_values, rewards, strict=True)]


def vcrl_score(rewards: Sequence[float]) -> float:
    """VCRL's ``p = sigma^2 / sigma^2_max`` (arXiv 2509.19803, sec. 3): the unbiased variance of the group's
    rewards over the largest a group of G binary rewards can have, ``G / (4 (G - 1))`` for even G and
    ``(G + 1) / (4 G)`` for odd G. 0 for a group of one."""
    g = len(rewards)
    if g < 2:
        return 0.0
    mean = sum(rewards) / g
    var = sum((r - mean) ** 2 for r in rewards) / (g - 1)
    var_max = g / (4 * (g - 1)) if g % 2 == 0 else (g + 1) / (4 * g)
    return var / var_max


def solution_steps(solution: str) -> list[str]:
    """A demonstration's steps: its non-empty lines (R^3's math unit is a line of the chain of thought)."""
    return [line for line in solution.splitlines() if line.strip()]


def cut_solution(solution: str, fraction: float) -> str:
    """GHPO's hint: the first ``round(len * fraction)`` characters of the solution (a cut may fall
    mid-word, as in its code)."""
    return solution[: round(len(solution) * fraction)]


def hinted_prompt(prompt: Any, hint: str) -> Any:
    """The prompt with GHPO's hint appended to the (last) user message."""
    if isinstance(prompt, str):
        return prompt + HINT_INTRO + hint
    messages = [dict(m) for m in prompt]
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    messages[last]["content"] = str(messages[last]["content"]) + HINT_INTRO + hint
    return messages


# ------------------------------------------------------------------------------------------------ the state


@dataclass(frozen=True)
class PoolItem:
    """What a curriculum knows about one prompt of its pool."""

    prompt_id: str
    difficulty: float | None = None
    source: str | None = None
    solution: str | None = None


@dataclass
class GroupOutcome:
    """One group rolled out: its prompt, the samples' rewards and verdicts, and the prefix or hint it had."""

    prompt_id: str
    rewards: list[float]
    correct: list[bool]
    difficulty: float | None = None
    source: str | None = None
    hint_fraction: float = 0.0


@dataclass
class Curriculum:
    """Base class: draws from the epoch order (``stream``), keeps no state. Subclasses override
    :meth:`draw`, :meth:`observe`, and the state methods.

    ``pool`` is every prompt; a rank draws from its shard of it (:meth:`shard`); ``settings`` the config section (``CurriculumConfig``); ``seed`` and
    ``rank`` seed every random draw as a pure function of ``(seed, rank, draws so far)``, so the state is a
    few numbers and a resumed run draws the same.
    """

    pool: list[PoolItem]
    settings: Any
    seed: int = 0
    rank: int = 0
    world: int = 1
    eps: float = 1e-6
    draws: int = 0
    hint_fractions: ClassVar[tuple[float, ...]] = ()
    _step_metrics: dict[str, float] = field(default_factory=dict)

    def shard(self) -> list[int]:
        """The pool indices this rank draws from (every ``world``-th, from ``rank``)."""
        return list(range(self.rank, len(self.pool), self.world))

    def draw(self, count: int, stream: Any) -> list[int]:
        """``count`` pool indices; ``stream.next_indices(k)`` gives the next ``k`` of the epoch order."""
        self.draws += 1
        return stream.next_indices(count)

    def prefix(self, index: int) -> str:
        """The demonstration prefix the rollout of pool item ``index`` starts from (``reverse``), else ``""``."""
        return ""

    def observe(self, outcomes: list[GroupOutcome]) -> None:
        """One rollout's groups (every rank's, under data parallelism)."""

    def rng(self, what: str = "") -> random.Random:
        return random.Random(f"{self.seed}/{self.rank}/{self.draws}/{what}")

    def metrics(self, drawn: list[int]) -> dict[str, float]:
        """The state to log, and what was drawn (mean difficulty, share per source)."""
        out = dict(self._step_metrics)
        difficulties = [self.pool[i].difficulty for i in drawn if self.pool[i].difficulty is not None]
        if difficulties:
            out["curriculum/drawn_difficulty"] = sum(difficulties) / len(difficulties)
        sources = [self.pool[i].source for i in drawn if self.pool[i].source is not None]
        for name in sorted(set(sources)):
            out[f"curriculum/drawn/{name}"] = sources.count(name) / len(drawn)
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"name": self.name, "draws": self.draws, **self.extra_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("name") != self.name:
            raise ValueError(
                f"the checkpoint's curriculum is {state.get('name')!r}, this run's {self.name!r}"
            )
        self.draws = int(state["draws"])
        self.load_extra_state(state)

    def extra_state(self) -> dict[str, Any]:
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        pass

    name: ClassVar[str] = "none"


def build_curriculum(
    name: str, pool: list[PoolItem], settings: Any, *, seed: int, rank: int = 0, world: int = 1
) -> Curriculum:
    """The registered curriculum ``name`` over ``pool``."""
    cls = CURRICULA.get(name)
    return cls(pool=pool, settings=settings, seed=seed, rank=rank, world=world)


def _arms(pool: list[PoolItem], indices: list[int], key: str) -> dict[str, list[int]]:
    """Pool indices per arm (a source, or a difficulty level), arms sorted by name."""
    arms: dict[str, list[int]] = {}
    for i in indices:
        item = pool[i]
        value = item.source if key == "source" else item.difficulty
        if value is None:
            raise ValueError(f"prompt {item.prompt_id!r} has no {key} (the curriculum's arms)")
        label = value if isinstance(value, str) else f"{value:g}"
        arms.setdefault(label, []).append(i)
    return dict(sorted(arms.items()))


def _arm_of(outcome: GroupOutcome, key: str) -> str | None:
    value = outcome.source if key == "source" else outcome.difficulty
    if value is None:
        return None
    return value if isinstance(value, str) else f"{value:g}"


# ------------------------------------------------------------------------------------------------ methods

CURRICULA.register("none", Curriculum)


@CURRICULA.register("adarft")
@dataclass
class AdaRFT(Curriculum):
    """A target difficulty moving toward the difficulty where the mean reward is ``beta``; the batch is the
    ``count`` prompts nearest it, ties (prompts of one level) in a seeded random order per batch. Within one
    batch, a second draw (the prompt filter asking for more candidates) takes the next nearest, not the same
    again."""

    name: ClassVar[str] = "adarft"
    target: float | None = None
    offered: list[int] = field(default_factory=list)  # pool indices drawn since the last observation

    def __post_init__(self) -> None:
        if any(p.difficulty is None for p in self.pool):
            raise ValueError("curriculum adarft: every prompt needs a difficulty (data.difficulty_field)")
        self._shard = self.shard()
        self._difficulties = [float(self.pool[i].difficulty) for i in self._shard]
        s, every = self.settings, [float(p.difficulty) for p in self.pool]
        # the range of the whole pool, not of the shard: every rank moves the same target
        self.d_min = s.d_min if s.d_min is not None else min(every)
        self.d_max = s.d_max if s.d_max is not None else max(every)
        # eta: the paper's 50 on its 0-100 scale, i.e. half the range, on any other scale
        self.eta = s.adarft_eta if s.adarft_eta is not None else (self.d_max - self.d_min) / 2
        if self.target is None:
            self.target = s.adarft_initial if s.adarft_initial is not None else self.d_min

    def draw(self, count: int, stream: Any) -> list[int]:
        self.draws += 1
        ranked = adarft_select(self._difficulties, self.target, len(self._shard), self.rng())
        nearest = [self._shard[i] for i in ranked]
        offered = set(self.offered)
        fresh = [i for i in nearest if i not in offered] or nearest
        chosen = (fresh * (count // len(fresh) + 1))[:count]
        self.offered += chosen
        return chosen

    def observe(self, outcomes: list[GroupOutcome]) -> None:
        rewards = [r for o in outcomes for r in o.rewards]
        if not rewards:
            return
        s = self.settings
        self.offered = []
        mean = sum(rewards) / len(rewards)
        self.target = adarft_target(
            self.target, mean, eta=self.eta, alpha=s.adarft_alpha, beta=s.adarft_beta,
            d_min=self.d_min, d_max=self.d_max,
        )  # fmt: skip

    def metrics(self, drawn: list[int]) -> dict[str, float]:
        return {**super().metrics(drawn), "curriculum/target_difficulty": float(self.target)}

    def extra_state(self) -> dict[str, Any]:
        return {"target": self.target, "offered": self.offered}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.target = float(state["target"])
        self.offered = [int(i) for i in state.get("offered", [])]


@dataclass
class _ArmBandit(Curriculum):
    """Shared by DUMP and SEC: arms over the pool, a probability per arm, one arm drawn per prompt."""

    def __post_init__(self) -> None:
        # The arms and their values are every rank's (observations are gathered); a rank picks prompts of
        # its own shard, leaving out an arm it has none of (as DUMP's sampler drops empty sources).
        self.labels = list(_arms(self.pool, list(range(len(self.pool))), self.settings.arms))
        self.arms = _arms(self.pool, self.shard(), self.settings.arms)

    def probabilities(self) -> list[float]:
        raise NotImplementedError

    def pick_in_arm(self, arm: str, rng: random.Random) -> int:
        return rng.choice(self.arms[arm])

    def draw(self, count: int, stream: Any) -> list[int]:
        self.draws += 1
        rng = self.rng()
        weights = [
            p if a in self.arms else 0.0 for a, p in zip(self.labels, self.probabilities(), strict=True)
        ]
        if not sum(weights):  # every arm this rank has is at probability 0 (underflow): uniform over them
            weights = [float(a in self.arms) for a in self.labels]
        arms = rng.choices(self.labels, weights=weights, k=count)
        return [self.pick_in_arm(a, rng) for a in arms]

    def scores(self) -> list[float]:
        raise NotImplementedError

    def metrics(self, drawn: list[int]) -> dict[str, float]:
        out = super().metrics(drawn)
        for label, p, s in zip(self.labels, self.probabilities(), self.scores(), strict=True):
            out[f"curriculum/p/{label}"] = p
            out[f"curriculum/score/{label}"] = s
        return out

    def abs_advantages_by_arm(self, outcomes: list[GroupOutcome]) -> dict[str, list[float]]:
        by_arm: dict[str, list[float]] = {}
        for o in outcomes:
            arm = _arm_of(o, self.settings.arms)
            if arm in self.labels:
                by_arm.setdefault(arm, []).extend(group_abs_advantages(o.rewards, self.eps))
        return by_arm


@CURRICULA.register("dump")
@dataclass
class DUMP(_ArmBandit):
    """UCB over sources on the mean |advantage| of each source's last ``dump_window`` samples; softmax at
    ``dump_temperature``; each prompt draws a source, then a prompt of it uniformly (with replacement)."""

    name: ClassVar[str] = "dump"
    windows: dict[str, list[float]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def scores(self) -> list[float]:
        means = [_mean(self.windows.get(a, [])) for a in self.labels]
        counts = [self.counts.get(a, 0) for a in self.labels]
        return dump_ucb_scores(means, counts, exploration=self.settings.dump_exploration)

    def probabilities(self) -> list[float]:
        if not self.counts:  # the authors' weights are uniform until the first update
            return [1 / len(self.labels)] * len(self.labels)
        return softmax(self.scores(), self.settings.dump_temperature)

    def observe(self, outcomes: list[GroupOutcome]) -> None:
        window = self.settings.dump_window
        for arm, values in self.abs_advantages_by_arm(outcomes).items():
            self.windows[arm] = (self.windows.get(arm, []) + values)[-window:]
            self.counts[arm] = self.counts.get(arm, 0) + len(values)

    def extra_state(self) -> dict[str, Any]:
        return {"windows": self.windows, "counts": self.counts}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.windows = {a: [float(v) for v in w] for a, w in state["windows"].items()}
        self.counts = {a: int(n) for a, n in state["counts"].items()}


@CURRICULA.register("sec")
@dataclass
class SEC(_ArmBandit):
    """A non-stationary bandit over arms: ``Q <- (1 - lr) Q + lr * mean|A|`` after each batch, Boltzmann
    sampling at ``sec_temperature``; inside an arm, prompts in a seeded order without replacement (a new
    order each pass), as the authors' loader."""

    name: ClassVar[str] = "sec"
    q: list[float] = field(default_factory=list)
    taken: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.q:
            self.q = [0.0] * len(self.labels)

    def scores(self) -> list[float]:
        return list(self.q)

    def probabilities(self) -> list[float]:
        return boltzmann(self.q, self.settings.sec_temperature)

    def pick_in_arm(self, arm: str, rng: random.Random) -> int:
        members, k = self.arms[arm], self.taken.get(arm, 0)
        order = list(members)
        random.Random(f"{self.seed}/{self.rank}/{arm}/{k // len(members)}").shuffle(order)
        self.taken[arm] = k + 1
        return order[k % len(members)]

    def observe(self, outcomes: list[GroupOutcome]) -> None:
        if not outcomes:
            return
        by_arm = self.abs_advantages_by_arm(outcomes)
        rewards = [_mean(by_arm[a]) if a in by_arm else None for a in self.labels]
        self.q = sec_update(self.q, rewards, self.settings.sec_lr)

    def extra_state(self) -> dict[str, Any]:
        return {"q": self.q, "taken": self.taken}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.q = [float(v) for v in state["q"]]
        self.taken = {a: int(n) for a, n in state["taken"].items()}


@CURRICULA.register("vcrl")
@dataclass
class VCRL(Curriculum):
    """Variance-based sampling with replay: each observed group's ``p``; prompts with
    ``p >= vcrl_threshold`` enter a memory bank of ``vcrl_bank_size`` (the highest ``p`` stay); each batch
    takes up to ``vcrl_replay`` of its prompts from the bank (highest ``p`` first, each taken out until it is
    observed again) and the rest from the epoch order, skipping prompts last seen with ``p`` below the
    threshold unless the order has nothing else."""

    name: ClassVar[str] = "vcrl"
    bank: dict[str, float] = field(default_factory=dict)
    last_p: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._index = {p.prompt_id: i for i, p in enumerate(self.pool)}

    def draw(self, count: int, stream: Any) -> list[int]:
        self.draws += 1
        s = self.settings
        # every rank holds the whole bank (observations are gathered); each replays the prompts it owns
        mine = [pid for pid in self.bank if self._index.get(pid, -1) % self.world == self.rank]
        replay = sorted(mine, key=lambda pid: -self.bank[pid])[: int(count * s.vcrl_replay)]
        for pid in replay:
            del self.bank[pid]
        chosen = [self._index[pid] for pid in replay]
        low = []
        for _ in range(len(self.pool)):  # at most one pass over the order looking for fresh prompts
            if len(chosen) >= count:
                break
            i = stream.next_indices(1)[0]
            if self.last_p.get(self.pool[i].prompt_id, 1.0) >= s.vcrl_threshold:
                chosen.append(i)
            else:
                low.append(i)
        chosen += low[: count - len(chosen)]
        self._step_metrics = {"curriculum/high_p_share": len(replay) / count if count else 0.0}
        return chosen

    def observe(self, outcomes: list[GroupOutcome]) -> None:
        s = self.settings
        for o in outcomes:
            p = vcrl_score(o.rewards)
            self.last_p[o.prompt_id] = p
            if p >= s.vcrl_threshold:
                self.bank[o.prompt_id] = p
            else:
                self.bank.pop(o.prompt_id, None)
        if len(self.bank) > s.vcrl_bank_size:
            keep = sorted(self.bank, key=lambda pid: -self.bank[pid])[: s.vcrl_bank_size]
            self.bank = {pid: self.bank[pid] for pid in keep}

    def extra_state(self) -> dict[str, Any]:
        return {"bank": self.bank, "last_p": self.last_p}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.bank = {k: float(v) for k, v in state["bank"].items()}
        self.last_p = {k: float(v) for k, v in state["last_p"].items()}


@CURRICULA.register("reverse")
@dataclass
class ReverseCurriculum(Curriculum):
    """R^3: the rollout starts from the prompt plus the first ``k`` steps of the demonstration (never all
    of them). ``staged``: ``k = round(f (L - 1))`` with ``f = 1 - stage / reverse_stages``, the stage
    advancing when a batch's mean reward reaches ``reverse_advance_reward``; ``mixed`` (the authors'
    released data): ``k`` uniform in ``0 .. L - 1`` per draw."""

    name: ClassVar[str] = "reverse"
    stage: int = 0

    def __post_init__(self) -> None:
        if any(not p.solution for p in self.pool):
            raise ValueError("curriculum reverse: every prompt needs a solution (curriculum.solution_field)")

    @property
    def fraction(self) -> float:
        return 1 - self.stage / self.settings.reverse_stages

    def prefix(self, index: int) -> str:
        item = self.pool[index]
        steps = solution_steps(item.solution)
        if self.settings.reverse_schedule == "mixed":
            k = random.Random(f"{self.seed}/{self.rank}/{self.draws}/{index}").randrange(len(steps))
        else:
            k = round(self.fraction * (len(steps) - 1))
        return "".join(line + "\n" for line in steps[:k])

    def observe(self, outcomes: list[GroupOutcome]) -> None:
        rewards = [r for o in outcomes for r in o.rewards]
        s = self.settings
        if s.reverse_schedule == "staged" and rewards and _mean(rewards) >= s.reverse_advance_reward:
            self.stage = min(self.stage + 1, s.reverse_stages)

    def metrics(self, drawn: list[int]) -> dict[str, float]:
        out = super().metrics(drawn)
        if self.settings.reverse_schedule == "staged":
            out["curriculum/prefix_fraction"] = self.fraction
        return out

    def extra_state(self) -> dict[str, Any]:
        return {"stage": self.stage}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.stage = int(state["stage"])


@CURRICULA.register("guided_hints")
@dataclass
class GuidedHints(Curriculum):
    """GHPO: prompts in the epoch order; a group with no correct sample is re-sampled within the step with a
    growing share of the reference solution as a hint (``hint_fractions``; the sampler does it, see
    ``rl/sampling.py``)."""

    name: ClassVar[str] = "guided_hints"
    hint_samples: int = 0

    def count_hint_samples(self, samples: int) -> None:
        """Samples generated with a hint (the groups re-sampled, every level tried), for the step's metrics."""
        self.hint_samples += samples

    def __post_init__(self) -> None:
        if any(not p.solution for p in self.pool):
            raise ValueError(
                "curriculum guided_hints: every prompt needs a solution (curriculum.solution_field)"
            )

    @property
    def hint_fractions(self) -> tuple[float, ...]:  # type: ignore[override]
        return tuple(self.settings.hint_fractions)

    def observe(self, outcomes: list[GroupOutcome]) -> None:
        hinted = [o for o in outcomes if o.hint_fraction > 0]
        self._step_metrics = {
            "curriculum/hint_groups": float(len(hinted)),
            "curriculum/hint_fraction": _mean([o.hint_fraction for o in hinted]),
            "curriculum/hint_solved": _mean([float(any(o.correct)) for o in hinted]),
        }

    def metrics(self, drawn: list[int]) -> dict[str, float]:
        out = {**super().metrics(drawn), "curriculum/hint_samples": float(self.hint_samples)}
        self.hint_samples = 0
        return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0
