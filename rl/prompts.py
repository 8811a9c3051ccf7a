"""The RL run's prompts: loading them, the seeded and resumable order they are drawn in (through the
curriculum and the prompt filter), and the text a prompt is sent as (template, L1 length budget, chat
template, a curriculum's response prefix)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from rewardlab.data import arithmetic
from rewardlab.data.arithmetic import levels
from rewardlab.data.loaders import load_records
from rewardlab.data.metadata import with_prompt_metadata
from rewardlab.rewardmodels.shaping.functional import L1_PROMPT_TEMPLATES, budget_schedule, sample_budget
from rewardlab.rl.config import RLConfig
from rewardlab.rl.curriculum import Curriculum, PoolItem, build_curriculum
from rewardlab.rl.prompt_filter import PromptFilter
from rewardlab.types import Record

__all__ = [
    "RESPONSE_PREFIX",
    "PromptSource",
    "build_prompt_filter",
    "load_prompt_records",
    "prompt_text",
    "with_budget",
    "with_metadata",
]

RESPONSE_PREFIX = "response_prefix"
"""Metadata key of the text a rollout starts from (a reverse curriculum's demonstration prefix, a guided
hint): sent after the prompt, never trained on, scored as the start of the completion."""


def load_prompt_records(cfg: RLConfig, *, eval_set: bool = False) -> list[Record]:
    """Training (or held-out) prompts as records: prompt, reference, metadata."""
    data = cfg.data
    path = data.eval_path if eval_set else data.path
    if path is None:
        return []
    if path == "arithmetic":
        dist = {
            "max_value": data.arithmetic_max_value,
            "ops": data.arithmetic_ops,
            "min_value": data.arithmetic_min_value,
            "carry": data.arithmetic_carry,
        }
        if eval_set:
            rows = arithmetic.heldout(**dist)
        else:
            rows = arithmetic.generate(data.num_examples, seed=cfg.train.seed, **dist)
        records = [Record(id=r["id"], prompt=r["prompt"], reference=r["reference"]) for r in rows]
    elif path == "arithmetic_levels":
        records = _level_records(cfg, eval_set)
    else:
        records = list(load_records(path, field_map=data.field_map or None, split=data.split))
    if eval_set and data.eval_limit:
        records = records[: data.eval_limit]
    return records


def _level_records(cfg: RLConfig, eval_set: bool) -> list[Record]:
    """The ``arithmetic_levels`` problems: a source and a difficulty per level, the worked solution."""
    data, lv = cfg.data, tuple(cfg.data.arithmetic_levels)
    if eval_set:
        rows = levels.heldout_levels(ops=data.arithmetic_ops, levels=lv)
    else:
        per_level = max(1, data.num_examples // len(lv))
        rows = levels.generate_levels(per_level, seed=cfg.train.seed, ops=data.arithmetic_ops, levels=lv)
    keys = ("difficulty", "source", "solution")
    return [
        Record(id=r["id"], prompt=r["prompt"], reference=r["reference"], metadata={k: r[k] for k in keys})
        for r in rows
    ]


def with_metadata(cfg: RLConfig, records: list[Record]) -> list[Record]:
    """``records`` with ``metadata["difficulty"]`` and ``["source"]`` read from the configured columns
    (``data.difficulty_field``, ``data.source_field``; the usual column names by default)."""
    data = cfg.data
    return [
        with_prompt_metadata(r, difficulty_field=data.difficulty_field, source_field=data.source_field)
        for r in records
    ]


def build_curriculum_for(records: list[Record], cfg: RLConfig, *, rank: int, world: int) -> Curriculum | None:
    """The run's curriculum (``algorithm.curriculum``) over ``records``, or ``None``."""
    cc = cfg.algorithm.curriculum
    if not cc.enabled:
        return None
    pool = [
        PoolItem(
            prompt_id=str(r.id),
            difficulty=r.metadata.get("difficulty"),
            source=r.metadata.get("source"),
            solution=r.metadata.get(cc.solution_field),
        )
        for r in records
    ]
    return build_curriculum(cc.name, pool, cc, seed=cfg.train.seed, rank=rank, world=world)


def build_prompt_filter(cfg: RLConfig) -> Any | None:
    """The run's :class:`rewardlab.rl.prompt_filter.PromptFilter` (``algorithm.prompt_filter``), or ``None``."""
    pf = cfg.algorithm.prompt_filter
    if not pf.enabled:
        return None
    return PromptFilter(
        mode=pf.mode,
        low=pf.low,
        high=pf.high,
        window=pf.window,
        p_easy=pf.p_easy,
        p_hard=pf.p_hard,
        target_zero_var=pf.target_zero_var,
        seed=cfg.train.seed,
    )


class PromptSource:
    """The training prompts in a seeded order per epoch (``data.shuffle``; under data parallelism each rank
    its own stride of it), or as the curriculum draws them, then through the prompt filter. The resumable
    state is the position ``(epoch, index)`` in the order and the curriculum's state."""

    def __init__(
        self,
        records: list[Record],
        cfg: RLConfig,
        *,
        rank: int,
        world: int,
        prompt_filter: Any | None,
        curriculum: Curriculum | None = None,
    ) -> None:
        self.records = records
        self.cfg = cfg
        self.rank = rank
        self.world = world
        self.filter = prompt_filter
        self.curriculum = curriculum
        self.epoch = 0
        self.index = 0
        self.order = self.epoch_order(0)
        self._drawn: list[int] = []  # pool indices drawn since the last metrics() (the curriculum's metrics)

    def epoch_order(self, epoch: int) -> list[int]:
        order = list(range(len(self.records)))
        if self.cfg.data.shuffle:
            random.Random(self.cfg.train.seed * 7919 + epoch).shuffle(order)
        # Data parallel: each rank takes its own stride of the same order.
        return order[self.rank :: self.world] if self.world > 1 else order

    @property
    def position(self) -> tuple[int, int]:
        """``(epoch, index)``: where the next prompt comes from."""
        return self.epoch, self.index

    @property
    def progress(self) -> float:
        """Epochs drawn, with the current one's share."""
        return self.epoch + self.index / max(len(self.order), 1)

    def seek(self, epoch: int, index: int) -> None:
        """Moves to a position (a checkpoint's, or the last batch trained under asynchronous rollouts)."""
        self.epoch, self.index = epoch, index
        self.order = self.epoch_order(epoch)

    def next_indices(self, count: int) -> list[int]:
        """The next ``count`` indices of the epoch order."""
        out = []
        while len(out) < count:
            if self.index >= len(self.order):
                self.epoch += 1
                self.index = 0
                self.order = self.epoch_order(self.epoch)
            out.append(self.order[self.index])
            self.index += 1
        return out

    def next(self, count: int) -> list[Record]:
        """The next ``count`` prompts, in order or as the curriculum draws them, unfiltered."""
        if self.curriculum is None:
            return [self.records[i] for i in self.next_indices(count)]
        indices = self.curriculum.draw(count, self)
        self._drawn += indices
        return [self._starting_point(i) for i in indices]

    def _starting_point(self, index: int) -> Record:
        """Prompt ``index`` with the response prefix its rollout starts from (a reverse curriculum's)."""
        record, prefix = self.records[index], self.curriculum.prefix(index)
        if not prefix:
            return record
        return dataclasses.replace(record, metadata={**record.metadata, RESPONSE_PREFIX: prefix})

    def metrics(self) -> dict[str, float]:
        """The curriculum's state and what it drew since the last call, under ``curriculum/``."""
        if self.curriculum is None:
            return {}
        drawn, self._drawn = self._drawn, []
        return self.curriculum.metrics(drawn)

    def state_dict(self) -> dict[str, Any]:
        """The position and the curriculum's state (JSON-serialisable)."""
        state: dict[str, Any] = {"epoch": self.epoch, "index": self.index}
        if self.curriculum is not None:
            state["curriculum"] = self.curriculum.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.seek(state["epoch"], state["index"])
        if self.curriculum is not None and "curriculum" in state:
            self.curriculum.load_state_dict(state["curriculum"])

    def draw(self, count: int) -> list[Record]:
        """The next ``count`` prompts the prompt filter keeps (``algorithm.prompt_filter``), drawing at most
        ``prompt_filter.max_draws * count`` candidates; short of that, the last rejected ones fill the batch."""
        if self.filter is None:
            return self.next(count)
        kept: list[Record] = []
        rejected: list[Record] = []
        budget = self.cfg.algorithm.prompt_filter.max_draws * count
        while len(kept) < count and budget > 0:
            candidates = self.next(min(count - len(kept), budget))
            budget -= len(candidates)
            for record, keep in zip(
                candidates, self.filter.select([str(r.id) for r in candidates]), strict=True
            ):
                (kept if keep else rejected).append(record)
        short = count - len(kept)
        return kept + (rejected[-short:] if short else [])


def prompt_text(cfg: RLConfig, tokenizer: Any, record: Record) -> str:
    """The text ``record`` is sent to the policy as: the data template, the L1 budget instruction, the chat
    template."""
    text = cfg.data.prompt_template.format(prompt=record.prompt_text)
    budget = record.metadata.get("length_budget")
    if budget is not None:  # L1: the budget is part of the prompt
        text = f"{text} {L1_PROMPT_TEMPLATES[cfg.reward.length_budget].format(budget=budget)}"
    if cfg.model.chat_template:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
    return text + record.metadata.get(RESPONSE_PREFIX, "")


def with_budget(cfg: RLConfig, record: Record, step: int, *, largest: bool = False) -> Record:
    """``record`` with an L1 token budget in its metadata (``reward.length_budget``): drawn from
    ``[length_budget_min, the schedule's largest]`` (seeded by step and prompt), or the largest."""
    rw = cfg.reward
    if rw.length_budget == "none":
        return record
    high = rw.length_budget_max
    if rw.length_budget_final_max:
        schedule = budget_schedule(step, cfg.train.max_steps, start=high, end=rw.length_budget_final_max)
        high = max(rw.length_budget_min, int(schedule))
    rng = random.Random(f"{cfg.train.seed}/{step}/{record.id}")
    budget = high if largest else sample_budget(rng, rw.length_budget_min, high)
    return dataclasses.replace(record, metadata={**record.metadata, "length_budget": budget})
