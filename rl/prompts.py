"""The RL run's prompts: loading them, the seeded and resumable order they are drawn in (through the
prompt filter), and the text a prompt is sent as (template, L1 length budget, chat template)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from rewardlab.data import arithmetic
from rewardlab.data.loaders import load_records
from rewardlab.rewardmodels.shaping.functional import L1_PROMPT_TEMPLATES, budget_schedule, sample_budget
from rewardlab.rl.config import RLConfig
from rewardlab.rl.prompt_filter import PromptFilter
from rewardlab.types import Record

__all__ = ["PromptSource", "build_prompt_filter", "load_prompt_records", "prompt_text", "with_budget"]


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
    else:
        records = list(load_records(path, field_map=data.field_map or None, split=data.split))
    if eval_set and data.eval_limit:
        records = records[: data.eval_limit]
    return records


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
    its own stride of it), drawn through the prompt filter; ``(epoch, index)`` is the resumable position."""

    def __init__(
        self, records: list[Record], cfg: RLConfig, *, rank: int, world: int, prompt_filter: Any | None
    ) -> None:
        self.records = records
        self.cfg = cfg
        self.rank = rank
        self.world = world
        self.filter = prompt_filter
        self.epoch = 0
        self.index = 0
        self.order = self.epoch_order(0)

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

    def next(self, count: int) -> list[Record]:
        """The next ``count`` prompts in order, unfiltered."""
        out = []
        while len(out) < count:
            if self.index >= len(self.order):
                self.epoch += 1
                self.index = 0
                self.order = self.epoch_order(self.epoch)
            out.append(self.records[self.order[self.index]])
            self.index += 1
        return out

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
    return text


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
