"""The RL training loop: rollout -> score -> shape -> advantages -> policy update, and nothing else.

All the math lives in :mod:`rewardkit.rl.core_algos` (advantages, losses, aggregation, KL, IS correction);
rewards come from one :class:`rewardkit.rl.rewards.RewardPipeline` (sources through
:class:`rewardkit.scoring.Scorer`, one warm pool for the run; every transform from
:mod:`rewardkit.rewardmodels.shaping`), called once per rollout and once per update. One step:

1. take ``prompts_per_step`` prompts (a seeded, resumable data position) and sample ``rollout.n``
   completions each (seeded per step, so a resumed run samples the same);
2. score them: a crashing reward function is reward 0 with a counted error, a ``None`` reward excludes
   the sample (counted), truncated samples are masked / penalised / kept (counted);
3. with DAPO dynamic sampling, drop groups whose rewards all agree and refill from new prompts;
4. compute old log-probs (recomputed by the trainer by default; free when there is one update per
   rollout), reference log-probs (only when ``kl_coef > 0``) and values (PPO);
5. advantages, then ``epochs`` x ``minibatches`` optimiser steps with gradient accumulation over
   micro-batches, the loss normalised by the token / sequence count of the whole optimiser step;
6. push the weights to the rollout backend and log metrics.
"""

from __future__ import annotations

import contextlib
import copy
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rewardkit.rl import core_algos as ca
from rewardkit.rl.config import RLConfig, dump_config
from rewardkit.rl.rewards import (  # noqa: F401  (the reward classes lived here; re-exported)
    CallableSource,
    RewardBatch,
    RewardPipeline,
    RewardSources,
    ScoredBatch,
    ScorerSource,
    _to_result,
    load_process_scorer,
)
from rewardkit.rl.rollout import Generation, SamplingParams, get_backend
from rewardkit.training import CheckpointManager, MetricsLogger, build_optimizer, build_scheduler
from rewardkit.training import device as dev
from rewardkit.training.checkpoint import load_module_weights, load_pretrained_weights, load_state
from rewardkit.training.device import resolve_dtype
from rewardkit.types import Record


# ----------------------------------------------------------------------------------------------------------
# Models and data
# ----------------------------------------------------------------------------------------------------------
def load_policy(path: str, *, tokenizer_path: str | None = None, dtype: str = "float32", seed: int = 0):
    """``(model, tokenizer)`` for a hub name / local folder, or ``tiny:NAME`` (a shipped tiny config)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if path.startswith("tiny:"):
        from rewardkit.tiny import build_tiny_model, load_tiny_tokenizer

        model = build_tiny_model(path.split(":", 1)[1] or "qwen2-tiny", seed=seed)
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_path) if tokenizer_path else load_tiny_tokenizer()
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=resolve_dtype(dtype))
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_path or path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if dtype != "float32" and path.startswith("tiny:"):
        model = model.to(resolve_dtype(dtype))
    return model, tokenizer


def load_prompt_records(cfg: RLConfig, *, eval_set: bool = False) -> list[Record]:
    """Training (or held-out) prompts as records: prompt, reference, metadata."""
    data = cfg.data
    path = data.eval_path if eval_set else data.path
    if path is None:
        return []
    if path == "arithmetic":
        from rewardkit.data import arithmetic

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
        from rewardkit.data.loaders import load_records

        records = list(load_records(path, field_map=data.field_map or None, split=data.split))
    if eval_set and data.eval_limit:
        records = records[: data.eval_limit]
    return records


class ValueModel(nn.Module):
    """PPO's critic: a copy of the policy's transformer body with a scalar head (zero-initialised)."""

    def __init__(self, policy: Any) -> None:
        super().__init__()
        body = policy.get_decoder() if hasattr(policy, "get_decoder") else policy.model
        self.body = copy.deepcopy(body)
        hidden = policy.config.hidden_size
        self.head = nn.Linear(hidden, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids, attention_mask, position_ids, response_len: int) -> torch.Tensor:
        out = self.body(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids)
        hidden = out.last_hidden_state[:, -(response_len + 1) : -1]
        return self.head(hidden.float()).squeeze(-1)


# ----------------------------------------------------------------------------------------------------------
# The rollout batch
# ----------------------------------------------------------------------------------------------------------
@dataclass
class Rollout:
    """Samples of one step, grouped contiguously (``n`` per prompt): generations and their rewards."""

    gens: list[Generation]
    reward: RewardBatch

    @property
    def records(self) -> list[Record]:
        return self.reward.records

    @property
    def scored(self) -> ScoredBatch:
        return self.reward.scored

    @property
    def rewards(self) -> torch.Tensor:
        return self.reward.rewards

    @property
    def valid(self) -> torch.Tensor:
        return self.reward.valid

    @property
    def keep(self) -> torch.Tensor:
        return self.reward.keep

    @property
    def stats(self) -> dict[str, float]:
        return self.reward.stats()

    def select_groups(self, groups: torch.Tensor, n: int) -> Rollout:
        idx = [g * n + j for g in groups.tolist() for j in range(n)]
        return Rollout([self.gens[i] for i in idx], self.reward.select(idx))

    @staticmethod
    def concat(parts: list[Rollout]) -> Rollout:
        return Rollout(sum((p.gens for p in parts), []), RewardBatch.concat([p.reward for p in parts]))


def build_tensors(gens: Sequence[Generation], pad_id: int) -> dict[str, torch.Tensor]:
    """Left-padded prompts and right-padded responses in one ``(B, P + T)`` batch, plus the response mask."""
    P = max(len(g.prompt_token_ids) for g in gens)
    T = max(max(len(g.token_ids) for g in gens), 1)
    B = len(gens)
    # Rows are filled in Python lists and converted once (one tensor per row costs more than the model at
    # tiny sizes).
    ids = [[pad_id] * (P - len(g.prompt_token_ids)) + list(g.prompt_token_ids) for g in gens]
    ids = [
        row + list(g.token_ids) + [pad_id] * (T - len(g.token_ids)) for row, g in zip(ids, gens, strict=True)
    ]
    att = [
        [0] * (P - len(g.prompt_token_ids))
        + [1] * (len(g.prompt_token_ids) + len(g.token_ids))
        + [0] * (T - len(g.token_ids))
        for g in gens
    ]
    resp = [[1.0] * len(g.token_ids) + [0.0] * (T - len(g.token_ids)) for g in gens]
    lps = [
        (list(g.logprobs) if g.logprobs is not None else [0.0] * len(g.token_ids))
        + [0.0] * (T - len(g.token_ids))
        for g in gens
    ]
    input_ids = torch.tensor(ids, dtype=torch.long).view(B, P + T)
    attention_mask = torch.tensor(att, dtype=torch.long).view(B, P + T)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "position_ids": position_ids,
        "response_mask": torch.tensor(resp, dtype=torch.float32).view(B, T),
        "responses": input_ids[:, P:],
        "rollout_logprobs": torch.tensor(lps, dtype=torch.float32).view(B, T),
    }


# ----------------------------------------------------------------------------------------------------------
# The trainer
# ----------------------------------------------------------------------------------------------------------
class RLTrainer:
    """Runs an RL config. ``model``/``tokenizer``/``train_records``/``reward_fns`` override the config's.

    >>> trainer = RLTrainer(load_config(preset="grpo"))            # doctest: +SKIP
    >>> trainer.train()                                             # doctest: +SKIP
    """

    def __init__(
        self,
        config: RLConfig,
        *,
        model: Any | None = None,
        tokenizer: Any | None = None,
        train_records: Sequence[Record] | None = None,
        eval_records: Sequence[Record] | None = None,
        reward_fns: Sequence[Any] = (),
        backend: Any | None = None,
        process_scorer: Any | None = None,
        console: Any = "stdout",
    ) -> None:
        import sys

        self.cfg = config
        self.console = sys.stdout if console == "stdout" else console
        cfg = config
        dev.set_threads(cfg.run.num_threads)
        self.dist = dev.init_distributed()
        self.device = dev.resolve_device(cfg.run.device)
        self.rank = torch.distributed.get_rank() if self.dist else 0
        self.world = torch.distributed.get_world_size() if self.dist else 1
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)
        if model is None:
            model, tok = load_policy(
                cfg.model.path, tokenizer_path=cfg.model.tokenizer, dtype=cfg.model.dtype, seed=cfg.model.seed
            )
            tokenizer = tokenizer or tok
        if tokenizer is None:
            raise ValueError("a tokenizer is needed when a model object is passed")
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.policy = model.to(self.device)
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.pad_token_id
        if cfg.model.gradient_checkpointing:
            self.policy.gradient_checkpointing_enable()
        self.use_bf16 = dev.use_bf16(cfg.train.bf16)
        self.ref = None
        if cfg.algorithm.kl_coef > 0:
            self.ref = copy.deepcopy(self.policy).eval()
            for p in self.ref.parameters():
                p.requires_grad_(False)
        self.value = ValueModel(self.policy).to(self.device) if cfg.algorithm.adv_estimator == "gae" else None
        self.train_model: Any = self.policy
        if self.dist:
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.train_model = DDP(
                self.policy, device_ids=[self.device.index] if self.device.type == "cuda" else None
            )
            if self.value is not None:
                self.value = DDP(
                    self.value, device_ids=[self.device.index] if self.device.type == "cuda" else None
                )
        tc = cfg.train
        self.opt = build_optimizer(
            self.policy.parameters(), lr=tc.lr, betas=tc.betas, weight_decay=tc.weight_decay
        )
        self.sched = self._scheduler(self.opt)
        self.value_opt = self.value_sched = None
        if self.value is not None:
            # weight decay 0.01: torch's AdamW default, which the critic has always used (verl's too)
            self.value_opt = build_optimizer(
                self.value.parameters(), lr=tc.value_lr, betas=tc.betas, weight_decay=0.01
            )
            self.value_sched = self._scheduler(self.value_opt)
        self.records = list(train_records) if train_records is not None else load_prompt_records(cfg)
        if not self.records:
            raise ValueError("no training prompts")
        self.eval_records = (
            list(eval_records) if eval_records is not None else load_prompt_records(cfg, eval_set=True)
        )
        self.reward_pipeline = RewardPipeline.from_config(
            cfg, reward_fns, process_scorer, tokenizer=tokenizer
        )
        self.reward = self.reward_pipeline.sources
        if backend is None:
            kw: dict[str, Any] = {}
            if cfg.rollout.backend == "hf":
                kw["batch_size"] = cfg.rollout.batch_size
            elif cfg.rollout.backend == "vllm":
                kw.update(
                    gpu_memory_utilization=cfg.rollout.vllm_gpu_memory_utilization, **cfg.rollout.vllm_kwargs
                )
            backend = get_backend(cfg.rollout.backend, self.policy, tokenizer, **kw)
        self.backend = backend
        self.step = 0
        self.data_epoch = 0
        self.data_index = 0
        self.num_tokens = 0
        self._order = self._epoch_order(0)
        self.initial_eval: dict[str, Any] = {}

    # -- schedule, data -------------------------------------------------------------------------------------
    def _scheduler(self, optimizer: torch.optim.Optimizer) -> Any:
        tc = self.cfg.train
        total = max(1, tc.steps * tc.epochs * tc.minibatches)
        return build_scheduler(optimizer, tc.lr_schedule, warmup_steps=tc.warmup_steps, total_steps=total)

    def _epoch_order(self, epoch: int) -> list[int]:
        order = list(range(len(self.records)))
        if self.cfg.data.shuffle:
            random.Random(self.cfg.train.seed * 7919 + epoch).shuffle(order)
        # Data parallel: each rank takes its own stride of the same order.
        return order[self.rank :: self.world] if self.world > 1 else order

    def _next_prompts(self, count: int) -> list[Record]:
        out = []
        while len(out) < count:
            if self.data_index >= len(self._order):
                self.data_epoch += 1
                self.data_index = 0
                self._order = self._epoch_order(self.data_epoch)
            out.append(self.records[self._order[self.data_index]])
            self.data_index += 1
        return out

    def _prompt_text(self, record: Record) -> str:
        text = self.cfg.data.prompt_template.format(prompt=record.prompt_text)
        if self.cfg.model.chat_template:
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            )
        return text

    # -- rollout and scoring ---------------------------------------------------------------------------------
    def _sampling(self, round_: int) -> SamplingParams:
        rc = self.cfg.rollout
        seed = (self.cfg.train.seed * 1_000_003 + self.step * 1_009 + round_ * 17 + self.rank) % (2**31)
        return SamplingParams(
            n=rc.n,
            temperature=rc.temperature,
            top_p=rc.top_p,
            top_k=rc.top_k,
            max_new_tokens=rc.max_new_tokens,
            stop=list(rc.stop),
            seed=seed,
            # The rollout's own log-probs are only read by IS correction or when old log-probs are not
            # recomputed; otherwise the trainer's forward pass provides them and the sampler skips the work.
            logprobs=self.cfg.algorithm.rollout_is != "none" or not self.cfg.algorithm.recompute_old_logprobs,
        )

    def _rollout(self, prompts: list[Record], round_: int, timings: dict[str, float]) -> Rollout:
        t0 = time.perf_counter()
        groups = self.backend.generate([self._prompt_text(r) for r in prompts], self._sampling(round_))
        timings["generate"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        gens = [g for group in groups for g in group]
        records = [
            Record(
                id=f"{rec.id}#{j}",
                prompt=rec.prompt,
                completion=g.text,
                reference=rec.reference,
                verifier=rec.verifier,
                metadata={**rec.metadata, "group": gi},
            )
            for gi, (rec, group) in enumerate(zip(prompts, groups, strict=True))
            for j, g in enumerate(group)
        ]
        reward = self.reward_pipeline.score(records, gens)
        timings["score"] += time.perf_counter() - t0
        return Rollout(gens, reward)

    # -- forward passes ---------------------------------------------------------------------------------------
    def _autocast(self):
        return dev.autocast(self.device, self.use_bf16)

    def _logprobs(
        self, model: Any, batch: dict[str, torch.Tensor], idx: torch.Tensor, *, entropy: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per-token log-probs (and entropies) of the responses of rows ``idx`` under ``model``."""
        T = batch["responses"].shape[1]
        with self._autocast():
            out = model(
                input_ids=batch["input_ids"][idx].to(self.device),
                attention_mask=batch["attention_mask"][idx].to(self.device),
                position_ids=batch["position_ids"][idx].to(self.device),
                logits_to_keep=T + 1,
                use_cache=False,
            )
        logits = out.logits[:, :-1].float()
        temp = self.cfg.rollout.temperature if self.cfg.rollout.temperature > 0 else 1.0
        labels = batch["responses"][idx].to(self.device)
        logp = ca.logprobs_from_logits(logits, labels, temperature=temp)
        ent = None
        if entropy:
            if self.cfg.algorithm.entropy_coef:
                ent = ca.entropy_from_logits(logits, temperature=temp)
            else:  # logged only: keep it out of the autograd graph
                with torch.no_grad():
                    ent = ca.entropy_from_logits(logits.detach(), temperature=temp)
        return logp, ent

    def _no_grad_logprobs(self, model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        B = batch["input_ids"].shape[0]
        mbs = max(1, self.cfg.train.micro_batch_size)
        outs = []
        with torch.no_grad():
            for s in range(0, B, mbs):
                outs.append(self._logprobs(model, batch, torch.arange(s, min(B, s + mbs)))[0].cpu())
        return torch.cat(outs)

    def _values(
        self, batch: dict[str, torch.Tensor], idx: torch.Tensor, model: Any | None = None
    ) -> torch.Tensor:
        T = batch["responses"].shape[1]
        model = model or self.value
        with self._autocast():
            return model(
                batch["input_ids"][idx].to(self.device),
                batch["attention_mask"][idx].to(self.device),
                batch["position_ids"][idx].to(self.device),
                T,
            ).float()

    # -- one step ---------------------------------------------------------------------------------------------
    def train_step(self) -> dict[str, Any]:
        """Generates, scores and updates once; returns the step's metrics."""
        _cfg, ac, tc, rc = self.cfg, self.cfg.algorithm, self.cfg.train, self.cfg.rollout
        n = rc.n
        timings = {"generate": 0.0, "score": 0.0, "train": 0.0}
        t_step = time.perf_counter()
        metrics: dict[str, Any] = {}

        # 1-3. Rollout, scoring, dynamic sampling.
        rollout = self._rollout(self._next_prompts(tc.prompts_per_step), 0, timings)
        all_parts = [rollout]
        zero_std = ca.frac_zero_std_groups(rollout.rewards, n, rollout.valid)
        if ac.dynamic_sampling:
            kept_parts = []
            kept = 0
            for round_ in range(ac.max_refill_rounds + 1):
                if round_ > 0:
                    part = self._rollout(self._next_prompts(tc.prompts_per_step), round_, timings)
                    all_parts.append(part)
                else:
                    part = rollout
                groups = ca.dynamic_sampling_keep(part.rewards, n, part.valid).nonzero().flatten()
                if len(groups):
                    kept_parts.append(part.select_groups(groups, n))
                    kept += len(groups)
                if kept >= tc.prompts_per_step:
                    break
            generated = sum(len(p.gens) for p in all_parts) // n
            metrics["dynamic_sampling/rounds"] = len(all_parts)
            metrics["dynamic_sampling/kept_groups"] = min(kept, tc.prompts_per_step)
            metrics["dynamic_sampling/kept_frac"] = kept / max(generated, 1)
            if kept_parts:
                train_rollout = Rollout.concat(kept_parts)
                if kept > tc.prompts_per_step:
                    train_rollout = train_rollout.select_groups(torch.arange(tc.prompts_per_step), n)
            else:
                train_rollout = None
        else:
            train_rollout = rollout
        everything = Rollout.concat(all_parts) if len(all_parts) > 1 else rollout
        metrics.update(self._rollout_metrics(everything, n))
        metrics["frac_reward_zero_std"] = (
            zero_std
            if not ac.dynamic_sampling
            else ca.frac_zero_std_groups(everything.rewards, n, everything.valid)
        )

        degenerate = train_rollout is None or (not ac.dynamic_sampling and zero_std >= 1.0)
        if degenerate:
            # Every group is degenerate: a group-baseline advantage is 0 everywhere, so the policy gets no
            # gradient from the reward. Say so instead of silently "training" on nothing.
            metrics["warning"] = "all groups have zero reward std: no policy gradient this step"
        if train_rollout is None and self.dist:
            train_rollout = rollout  # every rank must take part in the same optimiser steps
        skip = train_rollout is None or (
            degenerate
            and not self.dist
            and ac.adv_estimator in ("grpo", "dr_grpo", "rloo")
            and ac.kl_coef == 0
            and ac.entropy_coef == 0
        )
        if skip:
            metrics["skipped_update"] = 1
            metrics["learning_rate"] = self.sched.get_last_lr()[0]
        else:
            t0 = time.perf_counter()
            metrics.update(self._update(train_rollout))
            timings["train"] += time.perf_counter() - t0
        self.step += 1
        gen_tokens = sum(len(g.token_ids) for p in all_parts for g in p.gens)
        self.num_tokens += gen_tokens + sum(len(g.prompt_token_ids) for p in all_parts for g in p.gens)
        metrics["num_tokens"] = self.num_tokens
        metrics["timing/generate_s"] = timings["generate"]
        metrics["timing/score_s"] = timings["score"]
        metrics["timing/train_s"] = timings["train"]
        metrics["timing/step_s"] = time.perf_counter() - t_step
        metrics["tokens_per_s"] = gen_tokens / max(timings["generate"], 1e-9)
        metrics["epoch"] = self.data_epoch + self.data_index / max(len(self._order), 1)
        return metrics

    def _rollout_metrics(self, r: Rollout, n: int) -> dict[str, Any]:
        m: dict[str, Any] = {}
        v = r.valid
        rewards = r.rewards[v] if v.any() else torch.zeros(1)
        m["reward"] = float(rewards.mean())
        m["reward_std"] = float(rewards.std()) if rewards.numel() > 1 else 0.0
        for name, values in r.scored.per_source.items():
            vals = torch.tensor([x for x in values if x is not None] or [0.0])
            m[f"rewards/{name}/mean"] = float(vals.mean())
            m[f"rewards/{name}/std"] = float(vals.std()) if vals.numel() > 1 else 0.0
        m["accuracy"] = sum(r.scored.correct) / max(len(r.scored.correct), 1)
        m["scoring/errors"] = r.scored.num_errors
        m["scoring/error_rate"] = r.scored.num_errors / max(len(r.gens), 1)
        for kind, count in sorted(r.scored.errors.items()):
            m[f"scoring/error/{kind}"] = count
        m["scoring/missing_reward"] = int((~v).sum())
        lengths, term = r.reward.lengths, ~r.reward.truncated
        m["completions/mean_length"] = float(lengths.mean())
        m["completions/max_length"] = float(lengths.max())
        m["completions/min_length"] = float(lengths.min())
        # clipped_ratio, num_truncated, masked_truncated, overlong_penalty/*: the reward pipeline's statistics
        m.update(r.stats)
        m["completions/mean_terminated_length"] = float(lengths[term].mean()) if term.any() else 0.0
        m["samples/masked_from_loss"] = int((~(r.keep & r.valid)).sum())
        return m

    def _update(self, r: Rollout) -> dict[str, Any]:
        _cfg, ac, tc, rc = self.cfg, self.cfg.algorithm, self.cfg.train, self.cfg.rollout
        n = rc.n
        batch = build_tensors(r.gens, self.pad_id)
        mask = ca.apply_sample_mask(batch["response_mask"], (r.keep & r.valid).float())
        B, T = mask.shape
        m: dict[str, Any] = {}
        single_pass = tc.epochs * tc.minibatches == 1

        # 4. Old / reference log-probs, values.
        old_logp = None
        if not ac.recompute_old_logprobs:
            old_logp = batch["rollout_logprobs"]
        elif not single_pass:
            old_logp = self._no_grad_logprobs(self.policy, batch)
        ref_logp = self._no_grad_logprobs(self.ref, batch) if self.ref is not None else None
        old_values = None
        if self.value is not None:
            with torch.no_grad():
                old_values = torch.cat(
                    [
                        self._values(batch, torch.arange(s, min(B, s + tc.micro_batch_size))).cpu()
                        for s in range(0, B, tc.micro_batch_size)
                    ]
                )

        # 5. Token rewards (the reward pipeline's last stages: outcome, shaped process rewards), KL in the
        # reward, advantages.
        token_rewards, sstats = self.reward_pipeline.token_rewards(
            r.reward, batch["response_mask"], mask, [g.token_ids for g in r.gens]
        )
        m.update(sstats)
        if ac.use_kl_in_reward and ref_logp is not None:
            base = old_logp if old_logp is not None else self._no_grad_logprobs(self.policy, batch)
            old_logp = base if old_logp is None and not single_pass else old_logp
            token_rewards, kstats = ca.apply_kl_penalty(
                token_rewards, base, ref_logp, mask, ac.kl_coef, ac.kl_estimator
            )
            m["kl"] = kstats["kl"]
        adv_kwargs: dict[str, Any] = {"group_size": n, "valid": r.valid & r.keep, "gamma": ac.gamma}
        if ac.adv_estimator == "grpo":
            adv_kwargs.update(eps=ac.adv_eps, scale=ac.adv_scale)
        if ac.adv_estimator == "step_return":
            import rewardkit.rl.step_rewards  # noqa: F401  (registers the estimator)

            adv_kwargs.update(
                baseline=ac.step_baseline, scale=ac.adv_scale if ac.adv_scale == "group" else "none"
            )
        if ac.adv_estimator == "gae":
            adv_kwargs.update(values=old_values * mask, lam=ac.lam)
        advantages, returns = ca.compute_advantages(ac.adv_estimator, token_rewards, mask, **adv_kwargs)

        is_weights = None
        if ac.rollout_is != "none":
            if old_logp is None:
                old_logp = self._no_grad_logprobs(self.policy, batch)
            is_weights, is_keep, is_stats = ca.rollout_importance_weights(
                old_logp,
                batch["rollout_logprobs"],
                mask,
                cap=ac.rollout_is_cap,
                level=ac.rollout_is,
                mask_outside=ac.rollout_is_mask,
            )
            mask = ca.apply_sample_mask(mask, is_keep.float())
            m.update(is_stats)

        # 6. Optimisation: epochs x minibatches, accumulation over micro-batches.
        self.train_model.train()
        sums: Counter = Counter()
        counts: Counter = Counter()
        loss_sums: Counter = Counter()
        grad_norms = []
        gen = torch.Generator().manual_seed(tc.seed * 31 + self.step)
        mb_count = max(1, min(tc.minibatches, B))
        # A sample whose loss tokens all have advantage 0 adds exactly nothing to the gradient when the loss
        # has no KL or entropy term and there is no value model (GRPO's all-equal groups, DAPO-style). Its
        # forward/backward is skipped; the normalisers below still count its tokens, so the gradient is the
        # same as with it. (Not under data parallelism: every rank must run the same backward passes.)
        prunable = (
            tc.skip_zero_advantage
            and (self.ref is None or ac.use_kl_in_reward)
            and ac.entropy_coef == 0
            and self.value is None
            and not self.dist
        )
        active = (advantages * mask).abs().sum(-1) > 0 if prunable else torch.ones(B, dtype=torch.bool)
        m["samples/skipped_zero_advantage"] = int((~active & (mask.sum(-1) > 0)).sum())
        for _epoch in range(tc.epochs):
            perm = torch.randperm(B, generator=gen) if mb_count > 1 else torch.arange(B)
            for mb in torch.tensor_split(perm, mb_count):
                mb_mask = mask[mb]
                num_tokens, num_seqs = ca.batch_counts(mb_mask)
                if ac.loss_agg_mode == "seq-mean-token-sum-norm":
                    num_seqs = len(mb)
                if self.dist:
                    stats = torch.tensor([num_tokens, num_seqs], dtype=torch.float64, device=self.device)
                    torch.distributed.all_reduce(stats)
                    num_tokens, num_seqs = int(stats[0]), int(stats[1])
                agg = {
                    "global_num_tokens": num_tokens,
                    "global_num_seqs": num_seqs,
                    "max_len": rc.max_new_tokens,
                    "dp_size": self.world,
                }
                self.opt.zero_grad(set_to_none=True)
                if self.value_opt is not None:
                    self.value_opt.zero_grad(set_to_none=True)
                live = mb[active[mb]]
                micro = list(torch.split(live, max(1, tc.micro_batch_size))) if len(live) else []
                for k, idx in enumerate(micro):
                    sync = (
                        self.train_model.no_sync()
                        if self.dist and k < len(micro) - 1
                        else contextlib.nullcontext()
                    )
                    with sync:
                        sm, losses = self._micro_loss(
                            batch, idx, mask, advantages, old_logp, ref_logp, is_weights, agg
                        )
                    loss_sums.update(losses)
                    for key, value in sm.items():
                        sums[key] += value * len(idx)
                        counts[key] += len(idx)
                    if self.value is not None:
                        vsync = (
                            self.value.no_sync()
                            if self.dist and k < len(micro) - 1
                            else contextlib.nullcontext()
                        )
                        with vsync:
                            values = self._values(batch, idx)
                            vloss, vstats = ca.ppo_value_loss(
                                values,
                                old_values[idx].to(self.device),
                                returns[idx].to(self.device),
                                mask[idx].to(self.device),
                                cliprange_value=ac.cliprange_value,
                                loss_agg_mode=ac.loss_agg_mode,
                                **agg,
                            )
                            (ac.vf_coef * vloss).backward()
                        loss_sums["value_loss"] += vloss.item()
                        sums["vf_clipfrac"] += vstats["vf_clipfrac"] * len(idx)
                        counts["vf_clipfrac"] += len(idx)
                for p in self.policy.parameters():
                    if p.grad is None and p.requires_grad:
                        # A minibatch with nothing to learn still takes its optimiser step (zero gradient:
                        # Adam's moments decay as they would have), so skipping changes no later update.
                        p.grad = torch.zeros_like(p)
                norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), tc.max_grad_norm)
                grad_norms.append(float(norm))
                self.opt.step()
                self.sched.step()
                if self.value_opt is not None:
                    torch.nn.utils.clip_grad_norm_(self.value.parameters(), tc.max_grad_norm)
                    self.value_opt.step()
                    self.value_sched.step()
        self.backend.update_weights(self.policy)
        # With the global normalisation the micro-batch losses of one optimiser step sum to that step's loss;
        # "loss" is that sum averaged over the optimiser steps. Other statistics are sample-weighted means.
        n_opt = tc.epochs * mb_count
        for key, total in sums.items():
            m[key] = total / max(counts[key], 1)
        for key, total in loss_sums.items():
            m[key] = total / n_opt
        m["grad_norm"] = sum(grad_norms) / len(grad_norms)
        m["learning_rate"] = self.sched.get_last_lr()[0]
        m["advantages/mean"] = float(ca.masked_mean(advantages, mask)) if mask.any() else 0.0
        m["advantages/abs_mean"] = float(ca.masked_mean(advantages.abs(), mask)) if mask.any() else 0.0
        m["num_loss_tokens"] = int(mask.sum())
        return m

    def _micro_loss(
        self,
        batch: dict[str, torch.Tensor],
        idx: torch.Tensor,
        mask: torch.Tensor,
        advantages: torch.Tensor,
        old_logp: torch.Tensor | None,
        ref_logp: torch.Tensor | None,
        is_weights: torch.Tensor | None,
        agg: dict[str, Any],
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Forward + backward of one micro-batch; returns (statistics, loss terms)."""
        ac = self.cfg.algorithm
        losses: dict[str, float] = {}
        need_entropy = True  # logged every step (cheap next to the forward pass for small vocabularies)
        logp, ent = self._logprobs(self.train_model, batch, idx, entropy=need_entropy)
        mmask = mask[idx].to(self.device)
        old = old_logp[idx].to(self.device) if old_logp is not None else logp.detach()
        out = ca.compute_policy_loss(
            ac.policy_loss,
            logp,
            old,
            advantages[idx].to(self.device),
            mmask,
            clip_ratio_low=ac.clip_ratio_low,
            clip_ratio_high=ac.clip_ratio_high,
            loss_agg_mode=ac.loss_agg_mode,
            is_weights=is_weights[idx].to(self.device) if is_weights is not None else None,
            **({"clip_ratio_c": ac.clip_ratio_c} if ac.policy_loss == "ppo" else {}),
            **agg,
        )
        loss = out.loss
        stats = dict(out.stats)
        if ref_logp is not None:
            kl_tok = ca.kl_penalty(logp, ref_logp[idx].to(self.device), ac.kl_estimator)
            if mmask.any():
                stats["kl"] = float(ca.masked_mean(kl_tok.detach(), mmask))
            if not ac.use_kl_in_reward:
                kl_loss = ca.agg_loss(kl_tok * mmask, mmask, ac.loss_agg_mode, **agg)
                loss = loss + ac.kl_coef * kl_loss
                losses["kl_loss"] = kl_loss.item()
        if ent is not None:
            if mmask.any():
                stats["entropy"] = float(ca.masked_mean(ent.detach(), mmask))
            if ac.entropy_coef:
                ent_loss = ca.agg_loss(ent * mmask, mmask, ac.loss_agg_mode, **agg)
                loss = loss - ac.entropy_coef * ent_loss
                losses["entropy_loss"] = ent_loss.item()
        if loss.requires_grad:
            loss.backward()
        losses["policy_loss"] = out.loss.item()
        losses["loss"] = loss.item()
        return stats, losses

    # -- evaluation -------------------------------------------------------------------------------------------
    def evaluate(self, records: Sequence[Record] | None = None) -> dict[str, Any]:
        """Greedy pass@1 on held-out prompts with the first reward source's verdict."""
        records = list(records if records is not None else self.eval_records)
        if not records:
            return {}
        rc = self.cfg.rollout
        groups = self.backend.generate(
            [self._prompt_text(r) for r in records],
            SamplingParams(n=1, temperature=0.0, max_new_tokens=rc.max_new_tokens, stop=list(rc.stop)),
        )
        scored_records = [
            Record(id=r.id, prompt=r.prompt, completion=g[0].text, reference=r.reference, verifier=r.verifier)
            for r, g in zip(records, groups, strict=True)
        ]
        first = RewardSources([self.reward.sources[0]])
        scored = first.score(scored_records)
        return {"eval/pass@1": sum(scored.correct) / len(records), "eval/num": len(records)}

    # -- state ------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = {
            "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(),
            "data_epoch": self.data_epoch,
            "data_index": self.data_index,
            "num_tokens": self.num_tokens,
        }
        if self.value_opt is not None:
            state["value_optimizer"] = self.value_opt.state_dict()
            state["value_scheduler"] = self.value_sched.state_dict()
        return state

    def _unwrapped_value(self) -> Any:
        return self.value.module if hasattr(self.value, "module") else self.value

    def checkpoints(self, run_dir: str | Path | None = None) -> CheckpointManager:
        """The run's checkpoint folder (``RUN_DIR/checkpoints``)."""
        return CheckpointManager(run_dir or self.cfg.run.output_dir, keep=self.cfg.run.keep_checkpoints)

    def save(self, run_dir: str | Path | None = None) -> Path:
        """Writes ``checkpoints/step-N`` (``policy/``, ``value/`` for PPO, ``trainer_state.pt``, config)."""
        models = {"policy": self.policy}
        if self.value is not None:
            models["value"] = self._unwrapped_value()
        return self.checkpoints(run_dir).save(
            self.step,
            models=models,
            state=self.state_dict(),
            tokenizer=self.tokenizer,
            config_yaml=dump_config(self.cfg),
        )

    def load(self, checkpoint: str | Path) -> None:
        """Restores a checkpoint in place: weights, optimisers, schedules, data position and RNG states."""
        checkpoint = Path(checkpoint)
        load_pretrained_weights(self.policy, checkpoint / "policy")
        state = load_state(checkpoint)
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        if self.value is not None:
            load_module_weights(self._unwrapped_value(), checkpoint / "value")
            self.value_opt.load_state_dict(state["value_optimizer"])
            self.value_sched.load_state_dict(state["value_scheduler"])
        self.step = state["step"]
        self.data_epoch = state["data_epoch"]
        self.data_index = state["data_index"]
        self.num_tokens = state.get("num_tokens", 0)
        self._order = self._epoch_order(self.data_epoch)
        self.backend.update_weights(self.policy)

    # -- the loop ---------------------------------------------------------------------------------------------
    def train(self, *, resume: bool = False, steps: int | None = None) -> dict[str, Any]:
        """Runs ``train.steps`` steps (or ``steps`` more); returns the last step's metrics (with eval)."""
        cfg = self.cfg
        run_dir = Path(cfg.run.output_dir)
        resume_step = None
        main = self.rank == 0
        if resume:
            ckpt = self.checkpoints().resolve(True)
            self.load(ckpt)
            resume_step = self.step
            if main and self.console is not None:
                print(f"resuming from {ckpt} (step {self.step})", file=self.console, flush=True)
        if main:
            run_dir.mkdir(parents=True, exist_ok=True)
            dump_config(cfg, run_dir / "config.yaml")
        logger = (
            MetricsLogger(
                run_dir,
                console=self.console if main else None,
                tensorboard=cfg.run.tensorboard and main,
                resume_step=resume_step,
                log_every=cfg.run.log_every,
            )
            if main
            else None
        )
        last: dict[str, Any] = {}
        end = cfg.train.steps if steps is None else self.step + steps
        try:
            if self.step == 0 and self.eval_records and main:
                first = self.evaluate()
                self.initial_eval = first
                if logger:
                    logger.log(0, first)
            while self.step < end:
                metrics = self.train_step()
                if cfg.run.eval_every and self.step % cfg.run.eval_every == 0 and self.step < end:
                    metrics.update(self.evaluate())
                if self.step == end and self.eval_records:
                    metrics.update(self.evaluate())
                if logger:
                    logger.log(self.step, metrics)
                last = metrics
                if main and cfg.run.save_every and self.step % cfg.run.save_every == 0:
                    self.save()
            if main and (not cfg.run.save_every or self.step % cfg.run.save_every):
                self.save()
        finally:
            if logger:
                logger.close()
        return last

    def close(self) -> None:
        """Stops scoring workers and rollout engines."""
        self.reward.close()
        with contextlib.suppress(Exception):
            if self.backend is not None and getattr(self.backend, "name", "") != "hf":
                self.backend.close()

    def __enter__(self) -> RLTrainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
