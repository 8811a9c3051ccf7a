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
6. push the weights to the rollout backend and log metrics; rank 0 also appends the first
   ``run.log_completions`` samples (whole groups) of the step's first rollout to ``rollouts.jsonl``.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rewardkit.envs import Episode, build_env, episode_metrics, run_episodes
from rewardkit.generation import Generation, SamplingParams, get_backend
from rewardkit.rewardmodels.shaping.functional import L1_PROMPT_TEMPLATES, budget_schedule, sample_budget
from rewardkit.rl import core_algos as ca
from rewardkit.rl import packing
from rewardkit.rl.config import RLConfig, dump_config, validate
from rewardkit.rl.overlap import OverlappedRollouts
from rewardkit.rl.rewards import RewardBatch, RewardPipeline, RewardSources, ScoredBatch
from rewardkit.training import (
    CheckpointManager,
    MetricsLogger,
    build_optimizer,
    build_scheduler,
    lora,
    parallel,
)
from rewardkit.training import device as dev
from rewardkit.training.checkpoint import load_state
from rewardkit.training.device import resolve_dtype
from rewardkit.training.metrics import SampleLogger
from rewardkit.training.optim import optimizer_step
from rewardkit.types import Record, details_answer


# ----------------------------------------------------------------------------------------------------------
# Models and data
# ----------------------------------------------------------------------------------------------------------
def load_policy(
    path: str,
    *,
    tokenizer_path: str | None = None,
    dtype: str = "float32",
    seed: int = 0,
    load_in_4bit: bool = False,
):
    """``(model, tokenizer)`` for a hub name / local folder, or ``tiny:NAME`` (a shipped tiny config);
    ``load_in_4bit``: QLoRA's 4-bit NF4 base on this process's CUDA device."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if load_in_4bit:
        model, tokenizer = _load_4bit(path, tokenizer_path, dtype, seed)
    elif path.startswith("tiny:"):
        from rewardkit.data.tiny import build_tiny_model, load_tiny_tokenizer

        model = build_tiny_model(_tiny_name(path), seed=seed)
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_path) if tokenizer_path else load_tiny_tokenizer()
    else:
        from rewardkit.hub import check_model

        check_model(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=resolve_dtype(dtype))
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_path or path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if dtype != "float32" and path.startswith("tiny:") and not load_in_4bit:
        model = model.to(resolve_dtype(dtype))
    return model, tokenizer


def _tiny_name(path: str) -> str:
    """The shipped config a ``tiny:NAME`` path names (``tiny:`` alone: ``qwen2-tiny``)."""
    return path.split(":", 1)[1] or "qwen2-tiny"


def _load_4bit(path: str, tokenizer_path: str | None, dtype: str, seed: int) -> tuple[Any, Any]:
    """QLoRA's frozen base: bitsandbytes quantises while loading, so a ``tiny:`` model is saved first."""
    import tempfile

    from transformers import AutoModelForCausalLM, AutoTokenizer

    if path.startswith("tiny:"):
        from rewardkit.data.tiny import save_tiny_model

        path = save_tiny_model(tempfile.mkdtemp(prefix="rewardkit-tiny-"), _tiny_name(path), seed=seed)
    model = AutoModelForCausalLM.from_pretrained(
        path,
        dtype=resolve_dtype(dtype),
        quantization_config=lora.qlora_quantization_config(),
        device_map={"": torch.cuda.current_device()},
    )
    return model, AutoTokenizer.from_pretrained(tokenizer_path or path)


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


def _build_prompt_filter(cfg: RLConfig) -> Any | None:
    """The run's :class:`rewardkit.rl.prompt_filter.PromptFilter` (``algorithm.prompt_filter``), or ``None``."""
    ac = cfg.algorithm
    if ac.prompt_filter == "none":
        return None
    from rewardkit.rl.prompt_filter import PromptFilter

    return PromptFilter(
        mode=ac.prompt_filter,
        low=ac.prompt_filter_low,
        high=ac.prompt_filter_high,
        window=ac.prompt_filter_window,
        p_easy=ac.greso_p_easy,
        p_hard=ac.greso_p_hard,
        target_zero_var=ac.greso_target_zero_var,
        seed=cfg.train.seed,
    )


class ValueModel(nn.Module):
    """PPO's critic: a copy of the policy's transformer body with a scalar head (zero-initialised)."""

    def __init__(self, policy: Any) -> None:
        super().__init__()
        body = policy.get_decoder() if hasattr(policy, "get_decoder") else policy.model
        self.body = lora.plain_copy(body)  # a LoRA policy's base body: adapters left out, every weight trains
        hidden = policy.config.hidden_size
        self.head = nn.Linear(hidden, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(
        self, input_ids, attention_mask, position_ids, response_len: int | torch.Tensor
    ) -> torch.Tensor:
        """Values of the states before each response token: an int ``T`` reads the padded rows' last ``T``;
        a tensor reads a packed row at those positions (``PackedBatch.logit_index``)."""
        # No KV cache: with one, transformers would not read a packed row's position ids as sequence bounds.
        out = self.body(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
        )
        h = out.last_hidden_state
        hidden = h[:, response_len] if torch.is_tensor(response_len) else h[:, -(response_len + 1) : -1]
        # a copy, not a view: FSDP2 registers its pre-backward hook on the output, which an in-place op on a
        # view would drop
        return self.head(hidden.float()).squeeze(-1).clone()


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
    """Left-padded prompts and right-padded responses in one ``(B, P + T)`` batch, plus the response mask
    (every response token) and the loss mask (the tokens the policy sampled: a multi-turn episode's tool
    output is in the response, as context, but never in the loss)."""
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
    own = [
        ([float(x) for x in g.loss_mask] if g.loss_mask is not None else [1.0] * len(g.token_ids))
        + [0.0] * (T - len(g.token_ids))
        for g in gens
    ]
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
        "loss_mask": torch.tensor(own, dtype=torch.float32).view(B, T),
        "responses": input_ids[:, P:],
        "rollout_logprobs": torch.tensor(lps, dtype=torch.float32).view(B, T),
    }


# ----------------------------------------------------------------------------------------------------------
# The trainer
# ----------------------------------------------------------------------------------------------------------
@dataclass
class UpdateBatch:
    """What one update reads and its stages fill in (all on the CPU, ``B`` samples, ``T`` response tokens)."""

    tensors: dict[str, torch.Tensor]
    """:func:`build_tensors`'s padded batch."""
    mask: torch.Tensor
    """``(B, T)`` the loss mask: response tokens of samples that stay in the loss."""
    old_logp: torch.Tensor | None = None
    """``(B, T)`` pi_old (``None``: the update's first forward pass is pi_old)."""
    ref_logp: torch.Tensor | None = None
    """``(B, T)`` the reference policy's log-probs (KL)."""
    old_values: torch.Tensor | None = None
    """``(B, T)`` the critic's values before the update (PPO)."""
    token_rewards: torch.Tensor | None = None
    """``(B, T)`` rewards per token."""
    advantages: torch.Tensor | None = None
    """``(B, T)``."""
    returns: torch.Tensor | None = None
    """``(B, T)`` the critic's targets."""
    is_weights: torch.Tensor | None = None
    """Truncated importance weights for the rollout/trainer mismatch."""
    is_per_micro_batch: bool = False
    """The IS weights are computed in each micro-batch from its own forward pass: with one optimiser step
    per rollout that pass is pi_old, so no separate pass over the batch is needed."""

    @property
    def size(self) -> int:
        return self.mask.shape[0]


@dataclass
class _UpdateStats:
    """Running sums of one update's statistics (sample-weighted means) and loss terms (per optimiser step)."""

    sums: Counter = field(default_factory=Counter)
    counts: Counter = field(default_factory=Counter)
    losses: Counter = field(default_factory=Counter)
    grad_norms: list[float] = field(default_factory=list)
    extrema: dict[str, float] = field(default_factory=dict)

    def add(self, stats: dict[str, float], losses: dict[str, float], n: int) -> None:
        self.losses.update(losses)
        for key, value in stats.items():
            if key.endswith(("_min", "_max")):  # a minimum (maximum) over micro-batches, not a mean
                pick = min if key.endswith("_min") else max
                self.extrema[key] = pick(self.extrema.get(key, value), value)
                continue
            self.sums[key] += value * n
            self.counts[key] += n

    def means(self, optimizer_steps: int) -> dict[str, float]:
        """With the global normalisation the micro-batch losses of one optimiser step sum to that step's loss;
        a loss term is that sum averaged over the optimiser steps. Other statistics are sample-weighted."""
        out = {key: total / max(self.counts[key], 1) for key, total in self.sums.items()}
        out.update({key: total / optimizer_steps for key, total in self.losses.items()})
        out.update(self.extrema)
        out["grad_norm"] = sum(self.grad_norms) / len(self.grad_norms)
        return out


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
        env: Any | None = None,
        console: Any = "stdout",
    ) -> None:
        import sys

        self.cfg = cfg = validate(config)  # a config built in code gets the checks a loaded one got
        self.console = sys.stdout if console == "stdout" else console
        dev.set_threads(cfg.run.num_threads)
        self.dist = dev.init_distributed()
        self.device = dev.resolve_device(cfg.run.device)
        self.rank = torch.distributed.get_rank() if self.dist else 0
        self.world = torch.distributed.get_world_size() if self.dist else 1
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)
        self._setup_models(model, tokenizer)
        self._setup_optimizers()
        self.records = list(train_records) if train_records is not None else load_prompt_records(cfg)
        if not self.records:
            raise ValueError("no training prompts")
        self.eval_records = (
            list(eval_records) if eval_records is not None else load_prompt_records(cfg, eval_set=True)
        )
        self._score_lock = threading.Lock()
        self._scoring_context: tuple[dict[str, Generation], Any] = ({}, None)
        self.reward_pipeline = RewardPipeline.from_config(
            cfg, reward_fns, process_scorer, tokenizer=self.tokenizer, self_certainty=self._self_certainty
        )
        self.prompt_filter = _build_prompt_filter(cfg)
        self._overlap: OverlappedRollouts | None = None
        self._async_model: Any | None = None
        self._async_position: tuple[int, int] | None = None
        self.backend = backend if backend is not None else self._build_backend()
        if cfg.rollout.async_staleness and self.dist:
            raise ValueError(
                "rollout.async_staleness: asynchronous rollouts run on one process (no torchrun)"
            )
        self.env = env if env is not None else build_env(cfg.env)
        self.step = 0
        self.data_epoch = 0
        self.data_index = 0
        self.num_tokens = 0
        self.num_completion_tokens = 0
        self._order = self._epoch_order(0)
        self.initial_eval: dict[str, Any] = {}
        self.sample_logger: SampleLogger | None = None  # train() opens it on rank 0 (run.log_completions)
        self._sample_advantages: dict[int, float | None] = {}

    def _setup_models(self, model: Any | None, tokenizer: Any | None) -> None:
        """The policy (loaded unless given), the reference (only with a KL term) and PPO's critic, wrapped
        for data parallelism under torchrun (``train.strategy``)."""
        cfg = self.cfg
        if model is None:
            model, tok = load_policy(
                cfg.model.path,
                tokenizer_path=cfg.model.tokenizer,
                dtype=cfg.model.dtype,
                seed=cfg.model.seed,
                load_in_4bit=cfg.model.lora.load_in_4bit,
            )
            tokenizer = tokenizer or tok
        if tokenizer is None:
            raise ValueError("a tokenizer is needed when a model object is passed")
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.policy = model if getattr(model, "is_quantized", False) else self._to_device(model)
        lc = cfg.model.lora
        if lc.enabled and not lora.is_peft_model(self.policy):
            self.policy = lora.add_lora(
                self.policy,
                r=lc.r,
                alpha=lc.alpha,
                dropout=lc.dropout,
                target_modules=lc.target_modules,
                kbit=lc.load_in_4bit,
                gradient_checkpointing=cfg.model.gradient_checkpointing,
            )
        self.lora = lora.is_peft_model(self.policy)  # only the adapters train
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.pad_token_id
        if cfg.model.gradient_checkpointing:
            self.policy.gradient_checkpointing_enable()
        self.use_bf16 = dev.use_bf16(cfg.train.bf16)
        self.ref = None
        if cfg.algorithm.kl_coef > 0 and self.lora:
            self.ref = self.policy  # the reference is the base model: the same object, adapters off, no copy
        elif cfg.algorithm.kl_coef > 0:
            self.ref = copy.deepcopy(self.policy).eval()
            for p in self.ref.parameters():
                p.requires_grad_(False)
        self.value = (
            self._to_device(ValueModel(self.policy)) if cfg.algorithm.adv_estimator == "gae" else None
        )
        self.train_model: Any = self.policy
        if self.dist:
            self._wrap_models()

    def _to_device(self, model: Any) -> Any:
        """``model`` on the device; under FSDP left where it is (sharding moves each layer there as it shards
        it, so the whole model never sits on the device unsharded)."""
        return model if self.dist and self.cfg.train.strategy == "fsdp" else model.to(self.device)

    def _wrap_models(self) -> None:
        """DDP (policy and critic) or FSDP2 (policy, critic and a reference of its own), ``train.strategy``."""
        tc = self.cfg.train
        opts = {"mixed_precision": dev.use_bf16(tc.fsdp_mixed_precision), "cpu_offload": tc.fsdp_cpu_offload}
        self.train_model = parallel.wrap_model(self.policy, tc.strategy, self.device, **opts)
        if self.value is not None:
            self.value = parallel.wrap_model(self.value, tc.strategy, self.device, **opts)
        if self.ref is not None and self.ref is not self.policy:
            self.ref = parallel.wrap_model(self.ref, tc.strategy, self.device, **opts)  # ddp: left as it is

    def _setup_optimizers(self) -> None:
        tc, ac = self.cfg.train, self.cfg.algorithm
        self.kl_ctrl = ca.kl_controller(ac.kl_ctrl, ac.kl_coef, target=ac.kl_target, horizon=ac.kl_horizon)
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

    def _build_backend(self) -> Any:
        rc = self.cfg.rollout
        kw: dict[str, Any] = {}
        if rc.backend == "hf":
            kw["batch_size"] = rc.batch_size
        elif rc.backend == "vllm":
            kw.update(
                gpu_memory_utilization=rc.vllm_gpu_memory_utilization,
                sleep_level=rc.vllm_sleep_level,
                lora_mode=rc.vllm_lora,
                **rc.vllm_kwargs,
            )
        elif rc.backend == "vllm-server":
            kw.update(
                url=rc.vllm_server_url,
                sync=rc.vllm_server_sync,
                sync_dir=rc.vllm_server_sync_dir or str(Path(self.cfg.run.output_dir) / "vllm-sync"),
                nccl_address=rc.vllm_server_nccl_address,
                nccl_port=rc.vllm_server_nccl_port,
                timeout=rc.vllm_server_timeout,
            )
        return get_backend(rc.backend, self.policy, self.tokenizer, **kw)

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

    def _draw_prompts(self, count: int) -> list[Record]:
        """The next ``count`` prompts the prompt filter keeps (``algorithm.prompt_filter``), drawing at most
        ``prompt_filter_max_draws * count`` candidates; short of that, the last rejected ones fill the batch."""
        if self.prompt_filter is None:
            return self._next_prompts(count)
        kept: list[Record] = []
        rejected: list[Record] = []
        budget = self.cfg.algorithm.prompt_filter_max_draws * count
        while len(kept) < count and budget > 0:
            candidates = self._next_prompts(min(count - len(kept), budget))
            budget -= len(candidates)
            for record, keep in zip(
                candidates, self.prompt_filter.select([str(r.id) for r in candidates]), strict=True
            ):
                (kept if keep else rejected).append(record)
        short = count - len(kept)
        return kept + (rejected[-short:] if short else [])

    def _prompt_text(self, record: Record) -> str:
        text = self.cfg.data.prompt_template.format(prompt=record.prompt_text)
        budget = record.metadata.get("length_budget")
        if budget is not None:  # L1: the budget is part of the prompt
            text = f"{text} {L1_PROMPT_TEMPLATES[self.cfg.reward.length_budget].format(budget=budget)}"
        if self.cfg.model.chat_template:
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
            )
        return text

    # -- rollout and scoring ---------------------------------------------------------------------------------
    def _sampling(self, round_: int, step: int | None = None) -> SamplingParams:
        rc = self.cfg.rollout
        step = self.step if step is None else step
        seed = (self.cfg.train.seed * 1_000_003 + step * 1_009 + round_ * 17 + self.rank) % (2**31)
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

    def _generate(
        self, records: list[Record], params: SamplingParams, backend: Any | None = None
    ) -> list[list[Generation]]:
        """The backend's samples of each record's prompt: completions, or with an environment whole episodes
        (``rewardkit.envs``). A backend that generates with the policy itself gets it whole under FSDP
        (gathered once, no collective per forward pass: the ranks decode different lengths)."""
        prompts = [self._prompt_text(r) for r in records]
        backend = backend or self.backend
        own = getattr(backend, "model", None) is self.policy
        with parallel.gathered(self.policy) if own else contextlib.nullcontext():
            if self.env is None:
                return backend.generate(prompts, params)
            return run_episodes(
                backend,
                self.env,
                records,
                prompts,
                params,
                self.tokenizer,
                self.cfg.env,
                chat=self.cfg.model.chat_template,
            )  # type: ignore[return-value]

    def _rollout(
        self,
        prompts: list[Record],
        round_: int,
        timings: dict[str, float],
        *,
        step: int | None = None,
        backend: Any | None = None,
    ) -> Rollout:
        """Generates ``rollout.n`` samples of each prompt (with ``backend``, the run's by default) and scores
        them; ``step`` seeds the sampling (the current step by default; the rollout thread's is ahead)."""
        t0 = time.perf_counter()
        backend = backend or self.backend
        prompts = [self._with_budget(p, step) for p in prompts]
        groups = self._generate(prompts, self._sampling(round_, step), backend)
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
        with self._score_lock:  # the rollout thread and evaluation share the scoring pools
            self._scoring_context = ({r.id: g for r, g in zip(records, gens, strict=True)}, backend)
            reward = self.reward_pipeline.score(records, gens)
        if self.prompt_filter is not None:
            self.prompt_filter.observe(
                [str(p.id) for p in prompts], *self._group_outcomes(reward, len(prompts))
            )
        timings["score"] += time.perf_counter() - t0
        return Rollout(gens, reward)

    def _with_budget(self, record: Record, step: int | None, *, largest: bool = False) -> Record:
        """``record`` with an L1 token budget in its metadata (``reward.length_budget``): drawn from
        ``[length_budget_min, the schedule's largest]`` (seeded by step and prompt), or the largest."""
        rw = self.cfg.reward
        if rw.length_budget == "none":
            return record
        step = self.step if step is None else step
        high = rw.length_budget_max
        if rw.length_budget_final_max:
            schedule = budget_schedule(step, self.cfg.train.steps, start=high, end=rw.length_budget_final_max)
            high = max(rw.length_budget_min, int(schedule))
        rng = random.Random(f"{self.cfg.train.seed}/{step}/{record.id}")
        budget = high if largest else sample_budget(rng, rw.length_budget_min, high)
        return dataclasses.replace(record, metadata={**record.metadata, "length_budget": budget})

    def _group_outcomes(self, reward: RewardBatch, groups: int) -> tuple[list[list[float]], list[list[bool]]]:
        """Each group's shaped rewards and verdicts, for the prompt filter's estimates."""
        n = self.cfg.rollout.n
        values, correct = reward.rewards.tolist(), reward.scored.correct
        return (
            [values[g * n : (g + 1) * n] for g in range(groups)],
            [correct[g * n : (g + 1) * n] for g in range(groups)],
        )

    # -- forward passes ---------------------------------------------------------------------------------------
    def _autocast(self):
        return dev.autocast(self.device, self.use_bf16)

    def _logprobs(
        self, model: Any, batch: dict[str, torch.Tensor], idx: torch.Tensor, *, entropy: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per-token log-probs (and entropies) of the responses of rows ``idx`` under ``model``."""
        inputs, packed = self._forward_inputs(batch, idx)
        with self._autocast():
            out = model(**inputs, use_cache=False)
        if packed is None:
            logits, labels = out.logits[:, :-1].float(), batch["responses"][idx].to(self.device)
        else:  # (1, M) response tokens of the packed row
            logits, labels = out.logits.float(), packed.labels[None]
        temp = self.cfg.rollout.temperature if self.cfg.rollout.temperature > 0 else 1.0
        logp = ca.logprobs_from_logits(logits, labels, temperature=temp)
        ent = None
        if entropy:
            if self.cfg.algorithm.entropy_coef:
                ent = ca.entropy_from_logits(logits, temperature=temp)
            else:  # logged only: keep it out of the autograd graph
                with torch.no_grad():
                    ent = ca.entropy_from_logits(logits.detach(), temperature=temp)
        if packed is not None:  # back to (B, T)
            logp, ent = packed.unpack(logp[0]), packed.unpack(ent[0]) if ent is not None else None
        return logp, ent

    def _forward_inputs(
        self, batch: dict[str, torch.Tensor], idx: torch.Tensor
    ) -> tuple[dict[str, Any], packing.PackedBatch | None]:
        """The model's inputs for rows ``idx``: the padded rows (logits of the last ``T + 1`` positions), or
        with ``train.padding_free`` one packed row (logits of the positions that predict response tokens)."""
        if self.cfg.train.padding_free:
            rows = (batch[k][idx] for k in ("input_ids", "attention_mask", "response_mask"))
            packed = packing.pack(*rows).to(self.device)
            return packed.model_inputs(), packed
        return self._padded_inputs(batch, idx), None

    def _padded_inputs(self, batch: dict[str, torch.Tensor], idx: torch.Tensor) -> dict[str, Any]:
        """Rows ``idx`` as padded model inputs, keeping the logits of the last ``T + 1`` positions."""
        inputs = {k: batch[k][idx].to(self.device) for k in ("input_ids", "attention_mask", "position_ids")}
        return {**inputs, "logits_to_keep": batch["responses"].shape[1] + 1}

    def _micro_batches(self, batch: dict[str, torch.Tensor], rows: torch.Tensor) -> list[torch.Tensor]:
        """``rows`` split into forward passes: ``micro_batch_size`` samples each, or with
        ``micro_batch_tokens`` about that many real tokens each (the same count on every rank)."""
        tc = self.cfg.train
        if not len(rows):
            return []
        if not tc.micro_batch_tokens:
            return list(torch.split(rows, max(1, tc.micro_batch_size)))
        lengths = batch["attention_mask"][rows].sum(-1).tolist()
        count = len(packing.token_budget_micro_batches(lengths, tc.micro_batch_tokens))
        count = -parallel.all_ranks_min(-count, self.device)  # the most any rank needs
        return [
            rows[idx] for idx in packing.token_budget_micro_batches(lengths, tc.micro_batch_tokens, count)
        ]

    def _no_grad_logprobs(self, model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Per-token log-probs of every row under ``model``, without gradient, micro-batch by micro-batch."""
        rows = torch.arange(batch["input_ids"].shape[0])
        out = torch.zeros(batch["responses"].shape, dtype=torch.float32)
        with torch.no_grad():
            for idx in self._micro_batches(batch, rows):
                out[idx] = self._logprobs(model, batch, idx)[0].float().cpu()
        return out

    def _values(
        self, batch: dict[str, torch.Tensor], idx: torch.Tensor, model: Any | None = None
    ) -> torch.Tensor:
        model = model or self.value
        inputs, packed = self._forward_inputs(batch, idx)
        at = packed.logit_index if packed is not None else batch["responses"].shape[1]
        with self._autocast():
            values = model(inputs["input_ids"], inputs["attention_mask"], inputs["position_ids"], at).float()
        return values if packed is None else packed.unpack(values[0])

    # -- one step ---------------------------------------------------------------------------------------------
    def train_step(self) -> dict[str, Any]:
        """Generates, scores and updates once; returns the step's metrics."""
        _cfg, ac, tc, rc = self.cfg, self.cfg.algorithm, self.cfg.train, self.cfg.rollout
        n = rc.n
        timings = {"generate": 0.0, "score": 0.0, "train": 0.0}
        t_step = time.perf_counter()
        metrics: dict[str, Any] = {}
        self._sample_advantages = {}

        # 1-3. Rollout (or the rollout thread's batch), scoring, dynamic sampling.
        if self._overlap is not None:
            rollout = self._take_async(timings, metrics)
        else:
            rollout = self._rollout(self._draw_prompts(tc.prompts_per_step), 0, timings)
        zero_std = ca.frac_zero_std_groups(rollout.rewards, n, rollout.valid)
        if ac.dynamic_sampling:
            train_rollout, all_parts = self._dynamic_sampling(rollout, timings, metrics)
        else:
            train_rollout, all_parts = rollout, [rollout]
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
            and ac.adv_estimator in ("grpo", "dr_grpo", "rloo", "passk", "grpo_passk")
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
        if self._overlap is not None:
            self._overlap.publish(self.step, self._policy_weights())
        if self.sample_logger is not None:
            # dynamic sampling: the first round is logged; its dropped groups have no advantage
            self.sample_logger.log(self._sample_rows(rollout))
        metrics.update(self._throughput_metrics(all_parts, timings, time.perf_counter() - t_step))
        if self.prompt_filter is not None:
            metrics.update(self.prompt_filter.metrics())
        return metrics

    # -- asynchronous rollouts (rollout.async_staleness) -----------------------------------------------------
    def _start_async(self, end: int) -> None:
        """The rollout thread: a copy of the policy samples batches ``self.step .. end - 1`` at most
        ``rollout.async_staleness`` updates behind (:class:`OverlappedRollouts`)."""
        if self._async_model is None:
            self._async_model = copy.deepcopy(self.policy).eval()
            for p in self._async_model.parameters():
                p.requires_grad_(False)
        backend = get_backend("hf", self._async_model, self.tokenizer, batch_size=self.cfg.rollout.batch_size)

        def produce(step: int, weights: dict[str, torch.Tensor] | None) -> tuple[Rollout, dict, tuple]:
            if weights is not None:
                self._async_model.load_state_dict(weights)
            timings = {"generate": 0.0, "score": 0.0}
            prompts = self._draw_prompts(self.cfg.train.prompts_per_step)
            position = (self.data_epoch, self.data_index)
            return self._rollout(prompts, 0, timings, step=step, backend=backend), timings, position

        staleness = self.cfg.rollout.async_staleness
        self._overlap = OverlappedRollouts(produce, staleness=staleness, start=self.step, stop=end)

    def _take_async(self, timings: dict[str, float], metrics: dict[str, Any]) -> Rollout:
        """This step's batch from the rollout thread; its generation and scoring ran during earlier updates."""
        produced = self._overlap.take(self.step)
        rollout, produced_timings, self._async_position = produced.item
        timings.update(produced_timings)
        metrics["async/staleness"] = self.step - produced.version
        metrics["timing/wait_rollout_s"] = produced.wait_s
        return rollout

    def _policy_weights(self) -> dict[str, torch.Tensor]:
        """A copy of the policy's weights for the rollout thread's model (taken between updates)."""
        return {k: v.detach().clone() for k, v in self.policy.state_dict().items()}

    @property
    def _trained_position(self) -> tuple[int, int]:
        """The data position after the last batch trained: under asynchronous rollouts the thread has drawn
        ahead, and a resumed run must start after what was trained, not after what was generated."""
        if self._overlap is not None and self._async_position is not None:
            return self._async_position
        return self.data_epoch, self.data_index

    def _stop_async(self) -> None:
        if self._overlap is not None:
            self._overlap.close()
            self._overlap = None
            if self._async_position is not None:  # the next run draws after the last batch trained
                self.data_epoch, self.data_index = self._async_position
                self._order = self._epoch_order(self.data_epoch)
                self._async_position = None

    # -- label-free rewards -------------------------------------------------------------------------------------
    def _self_certainty(self, records: Sequence[Record]) -> list[float]:
        """The ``self_certainty`` source's scores: a forward pass, without gradient, of the model that sampled
        ``records`` (the rollout thread's copy under asynchronous rollouts), over their completions."""
        by_id, backend = self._scoring_context
        gens = [by_id[r.id] for r in records]
        model = getattr(backend, "model", None) or self.policy
        tensors = build_tensors(gens, self.pad_id)
        temp = self.cfg.rollout.temperature if self.cfg.rollout.temperature > 0 else 1.0
        scores = []
        with torch.no_grad():
            for idx in self._micro_batches(tensors, torch.arange(len(gens))):
                with self._autocast():
                    logits = model(**self._padded_inputs(tensors, idx), use_cache=False).logits[:, :-1]
                mask = tensors["loss_mask"][idx].to(self.device)
                scores.append(ca.self_certainty(logits.float() / temp, mask).cpu())
        return torch.cat(scores).tolist() if scores else []

    def _sample_rows(self, r: Rollout) -> list[dict[str, Any]]:
        """``rollouts.jsonl``'s rows of this step: the first ``run.log_completions`` samples of ``r``, rounded
        up to whole groups (the advantages are those :meth:`_update` stashed, ``None`` outside the update)."""
        n = self.cfg.rollout.n
        count = min(len(r.gens), -(-self.cfg.run.log_completions // n) * n)
        prompts = {gi: self._prompt_text(r.records[gi * n]) for gi in range(-(-count // n))}
        return [self._sample_row(r, i, prompts[i // n]) for i in range(count)]

    def _sample_row(self, r: Rollout, i: int, prompt: str) -> dict[str, Any]:
        """One sample as a ``rollouts.jsonl`` row (see docs/rl.md)."""
        n, gen, scored = self.cfg.rollout.n, r.gens[i], r.scored
        details = scored.details[i]
        return {
            "step": self.step,
            "group": i // n,
            "index": i % n,
            "prompt": prompt,
            "completion": gen.text,
            "reference": r.records[i].reference,
            "reward": scored.rewards[i],
            "shaped_reward": float(r.rewards[i]),
            "rewards": {name: values[i] for name, values in scored.per_source.items()},
            "advantage": self._sample_advantages.get(id(gen)),
            "length": len(gen.token_ids),
            "truncated": bool(r.reward.truncated[i]),
            "correct": bool(scored.correct[i]),
            "answer": details_answer(details),
            "details": details,
            "error": scored.sample_errors[i],
            "finish_reason": gen.finish_reason,
        }

    def _dynamic_sampling(
        self, rollout: Rollout, timings: dict[str, float], metrics: dict[str, Any]
    ) -> tuple[Rollout | None, list[Rollout]]:
        """DAPO's dynamic sampling: keep the groups whose rewards differ, refill from new prompts (at most
        ``max_refill_rounds`` more rollouts); returns the training rollout (``None``: nothing kept) and every
        rollout generated. Under data parallelism the ranks refill in lockstep (until every rank has enough)
        and train on the same number of groups, the fewest any rank kept: unequal batches would run unequal
        numbers of collectives (FSDP's gathers, DDP's reductions per minibatch) and hang."""
        ac, n, wanted = self.cfg.algorithm, self.cfg.rollout.n, self.cfg.train.prompts_per_step
        all_parts, kept_parts, kept = [rollout], [], 0
        for round_ in range(ac.max_refill_rounds + 1):
            part = rollout if round_ == 0 else self._rollout(self._draw_prompts(wanted), round_, timings)
            if round_ > 0:
                all_parts.append(part)
            groups = ca.dynamic_sampling_keep(part.rewards, n, part.valid).nonzero().flatten()
            if len(groups):
                kept_parts.append(part.select_groups(groups, n))
                kept += len(groups)
            if parallel.all_ranks_min(kept, self.device) >= wanted:
                break
        generated = sum(len(p.gens) for p in all_parts) // n
        common = parallel.all_ranks_min(min(kept, wanted), self.device)
        metrics["dynamic_sampling/rounds"] = len(all_parts)
        metrics["dynamic_sampling/kept_groups"] = common
        metrics["dynamic_sampling/kept_frac"] = kept / max(generated, 1)
        if not common:
            return None, all_parts
        train_rollout = Rollout.concat(kept_parts)
        if kept > common:
            train_rollout = train_rollout.select_groups(torch.arange(common), n)
        return train_rollout, all_parts

    def _throughput_metrics(
        self, parts: list[Rollout], timings: dict[str, float], step_s: float
    ) -> dict[str, Any]:
        # the policy's own tokens (an episode's tool output is not generated)
        gen_tokens = sum(
            len(g.token_ids) if g.loss_mask is None else sum(g.loss_mask) for p in parts for g in p.gens
        )
        self.num_tokens += gen_tokens + sum(len(g.prompt_token_ids) for p in parts for g in p.gens)
        self.num_completion_tokens += gen_tokens
        return {
            "num_tokens": self.num_tokens,
            "num_completion_tokens": self.num_completion_tokens,
            "timing/generate_s": timings["generate"],
            "timing/score_s": timings["score"],
            "timing/train_s": timings["train"],
            "timing/step_s": step_s,
            "tokens_per_s": gen_tokens / max(timings["generate"], 1e-9),
            "samples_per_s": sum(len(p.gens) for p in parts) / max(timings["generate"], 1e-9),
            "epoch": self.data_epoch + self.data_index / max(len(self._order), 1),
        }

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
        m.update(episode_metrics([g.summary() for g in r.gens if isinstance(g, Episode)]))
        return m

    # -- the update, stage by stage ----------------------------------------------------------------------
    def _update(self, r: Rollout) -> dict[str, Any]:
        """One policy update on a rollout: forward passes without gradient, token rewards, advantages,
        importance weights, then ``epochs x minibatches`` optimiser steps."""
        m: dict[str, Any] = {}
        self.backend.release_memory()  # vLLM sleep mode: the engine's memory is the update's until update_weights
        u = self._prepare_update(r)
        self._reference_passes(u)
        self._token_rewards(u, r, m)
        self._advantages(u, r)
        self._importance_weights(u, m)
        if self.sample_logger is not None:
            self._stash_advantages(u, r)
        m.update(self._optimise(u))
        self.backend.update_weights(self.policy)
        if "kl" in m:
            self.kl_ctrl.update(m["kl"], u.size)
        m["kl_coef"] = self.kl_ctrl.value
        return m

    def _stash_advantages(self, u: UpdateBatch, r: Rollout) -> None:
        """Each sample's mean advantage over its loss tokens, keyed by its generation (the logged samples
        come from the first rollout, the update's from dynamic sampling's selection); ``None``: no loss
        token."""
        tokens = u.mask.sum(-1)
        means = (u.advantages * u.mask).sum(-1) / tokens.clamp(min=1)
        self._sample_advantages = {
            id(g): float(m) if t > 0 else None
            for g, m, t in zip(r.gens, means.tolist(), tokens.tolist(), strict=True)
        }

    @property
    def _single_pass(self) -> bool:
        """One optimiser step per rollout: the update's first forward pass is pi_old, nothing to store."""
        return self.cfg.train.epochs * self.cfg.train.minibatches == 1

    def _prepare_update(self, r: Rollout) -> UpdateBatch:
        tensors = build_tensors(r.gens, self.pad_id)
        mask = ca.apply_sample_mask(tensors["loss_mask"], (r.keep & r.valid).float())
        return UpdateBatch(tensors, mask)

    def _reference_passes(self, u: UpdateBatch) -> None:
        """pi_old (when the update makes more than one pass, or the rollout's own is trusted), the reference
        policy's log-probs (KL) and the critic's values (PPO), all without gradient."""
        ac = self.cfg.algorithm
        if not ac.recompute_old_logprobs:
            u.old_logp = u.tensors["rollout_logprobs"]
        elif not self._single_pass:
            u.old_logp = self._no_grad_logprobs(self.policy, u.tensors)
        if self.ref is not None:
            with lora.adapters_disabled(self.ref):  # LoRA: the policy without its adapters
                u.ref_logp = self._no_grad_logprobs(self.ref, u.tensors)
        if self.value is not None:
            u.old_values = torch.zeros(u.tensors["responses"].shape, dtype=torch.float32)
            with torch.no_grad():
                for idx in self._micro_batches(u.tensors, torch.arange(u.size)):
                    u.old_values[idx] = self._values(u.tensors, idx).float().cpu()

    def _token_rewards(self, u: UpdateBatch, r: Rollout, m: dict[str, Any]) -> None:
        """The reward pipeline's token rewards, then the KL penalty in the reward (REINFORCE++, RLOO, PPO)."""
        ac = self.cfg.algorithm
        u.token_rewards, stats = self.reward_pipeline.token_rewards(
            r.reward, u.tensors["response_mask"], u.mask, [g.token_ids for g in r.gens]
        )
        m.update(stats)
        if ac.use_kl_in_reward and u.ref_logp is not None:
            base = u.old_logp if u.old_logp is not None else self._no_grad_logprobs(self.policy, u.tensors)
            if u.old_logp is None and not self._single_pass:
                u.old_logp = base
            u.token_rewards, kstats = ca.apply_kl_penalty(
                u.token_rewards, base, u.ref_logp, u.mask, self.kl_ctrl.value, ac.kl_estimator
            )
            m["kl"] = kstats["kl"]

    def _advantages(self, u: UpdateBatch, r: Rollout) -> None:
        ac = self.cfg.algorithm
        inputs = ca.AdvantageInputs(
            u.token_rewards,
            u.mask,
            group_size=self.cfg.rollout.n,
            valid=r.valid & r.keep,
            values=u.old_values * u.mask if u.old_values is not None else None,
            gamma=ac.gamma,
            lam=ac.lam,
            eps=ac.adv_eps,
            scale=ac.adv_scale,
            baseline=ac.step_baseline,
            k=ac.passk_k,
        )
        if ac.adv_estimator == "gdpo":
            inputs.source_rewards, inputs.source_weights = self.reward_pipeline.source_rewards(r.reward)
        u.advantages, u.returns = inputs.estimate(ac.adv_estimator)
        if ac.positive_adv_weight != 1.0 or ac.negative_adv_weight != 1.0:
            u.advantages = ca.reweight_advantages(
                u.advantages, positive_weight=ac.positive_adv_weight, negative_weight=ac.negative_adv_weight
            )

    def _importance_weights(self, u: UpdateBatch, m: dict[str, Any]) -> None:
        """Truncated IS weights for the rollout engine / trainer mismatch (``algorithm.rollout_is``)."""
        ac = self.cfg.algorithm
        if ac.rollout_is == "none":
            return
        if u.old_logp is None and not ac.rollout_is_mask:
            u.is_per_micro_batch = True  # single pass: _micro_loss's own forward pass is pi_old
            return
        if u.old_logp is None:
            u.old_logp = self._no_grad_logprobs(self.policy, u.tensors)
        u.is_weights, keep, stats = ca.rollout_importance_weights(
            u.old_logp,
            u.tensors["rollout_logprobs"],
            u.mask,
            cap=ac.rollout_is_cap,
            level=ac.rollout_is,
            mask_outside=ac.rollout_is_mask,
        )
        u.mask = ca.apply_sample_mask(u.mask, keep.float())
        m.update(stats)

    def _active_samples(self, u: UpdateBatch, m: dict[str, Any]) -> torch.Tensor:
        """Samples whose forward/backward can change the gradient.

        A sample whose loss tokens all have advantage 0 adds exactly nothing to the gradient when the loss has
        no KL or entropy term and there is no value model (GRPO's all-equal groups). Its forward/backward is
        skipped; the normalisers still count its tokens, so the gradient is the same as with it. (Not under
        data parallelism: every rank must run the same backward passes.)"""
        ac = self.cfg.algorithm
        prunable = (
            self.cfg.train.skip_zero_advantage
            and (self.ref is None or ac.use_kl_in_reward)
            and ac.entropy_coef == 0
            and self.value is None
            and not self.dist
        )
        active = (
            (u.advantages * u.mask).abs().sum(-1) > 0 if prunable else torch.ones(u.size, dtype=torch.bool)
        )
        m["samples/skipped_zero_advantage"] = int((~active & (u.mask.sum(-1) > 0)).sum())
        return active

    def _optimise(self, u: UpdateBatch) -> dict[str, Any]:
        """``epochs x minibatches`` optimiser steps; returns the update's metrics."""
        tc = self.cfg.train
        self.train_model.train()
        m: dict[str, Any] = {}
        acc = _UpdateStats()
        active = self._active_samples(u, m)
        gen = torch.Generator().manual_seed(tc.seed * 31 + self.step)
        mb_count = max(1, min(tc.minibatches, u.size))
        for _epoch in range(tc.epochs):
            perm = torch.randperm(u.size, generator=gen) if mb_count > 1 else torch.arange(u.size)
            for mb in torch.tensor_split(perm, mb_count):
                self._minibatch_step(u, mb, active, acc)
        m.update(acc.means(tc.epochs * mb_count))
        m["learning_rate"] = self.sched.get_last_lr()[0]
        m["advantages/mean"] = float(ca.masked_mean(u.advantages, u.mask)) if u.mask.any() else 0.0
        m["advantages/abs_mean"] = float(ca.masked_mean(u.advantages.abs(), u.mask)) if u.mask.any() else 0.0
        m["num_loss_tokens"] = int(u.mask.sum())
        return m

    def _aggregation(self, mb_mask: torch.Tensor) -> dict[str, Any]:
        """The loss normalisers of one optimiser step (token and sequence counts, summed over ranks), so
        that micro-batch losses add up to the step's loss whatever the accumulation."""
        num_tokens, num_seqs = ca.batch_counts(mb_mask)
        if self.cfg.algorithm.loss_agg_mode == "seq-mean-token-sum-norm":
            num_seqs = mb_mask.shape[0]
        if self.dist:
            stats = torch.tensor([num_tokens, num_seqs], dtype=torch.float64, device=self.device)
            torch.distributed.all_reduce(stats)
            num_tokens, num_seqs = int(stats[0]), int(stats[1])
        return {
            "global_num_tokens": num_tokens,
            "global_num_seqs": num_seqs,
            "max_len": self.cfg.rollout.max_new_tokens,
            "dp_size": self.world,
        }

    def _minibatch_step(
        self, u: UpdateBatch, mb: torch.Tensor, active: torch.Tensor, acc: _UpdateStats
    ) -> None:
        """Gradient accumulation over the minibatch's micro-batches, then one optimiser step (policy and
        critic)."""
        tc = self.cfg.train
        agg = self._aggregation(u.mask[mb])
        self.opt.zero_grad(set_to_none=True)
        if self.value_opt is not None:
            self.value_opt.zero_grad(set_to_none=True)
        live = mb[active[mb]]
        micro = self._micro_batches(u.tensors, live)
        for k, idx in enumerate(micro):
            last = k == len(micro) - 1
            with self._no_sync(self.train_model, last):
                stats, losses = self._micro_loss(u, idx, agg)
            acc.add(stats, losses, len(idx))
            if self.value is not None:
                with self._no_sync(self.value, last):
                    stats, losses = self._value_micro_loss(u, idx, agg)
                acc.add(stats, losses, len(idx))
        for p in self.policy.parameters():
            if p.grad is None and p.requires_grad:
                # A minibatch with nothing to learn still takes its optimiser step (zero gradient: Adam's
                # moments decay as they would have), so skipping changes no later update.
                p.grad = torch.zeros_like(p)
        acc.grad_norms.append(
            optimizer_step(self.policy.parameters(), self.opt, self.sched, tc.max_grad_norm)
        )
        if self.value_opt is not None:
            optimizer_step(self.value.parameters(), self.value_opt, self.value_sched, tc.max_grad_norm)

    def _no_sync(self, model: Any, last: bool) -> Any:
        """No gradient communication on every micro-batch but the last (DDP's ``no_sync``, FSDP's
        ``set_requires_gradient_sync(False)``): one reduction per optimiser step."""
        return parallel.no_sync(model) if self.dist and not last else contextlib.nullcontext()

    def _micro_loss(
        self, u: UpdateBatch, idx: torch.Tensor, agg: dict[str, Any]
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Forward + backward of the policy loss (plus KL / entropy terms) on one micro-batch; returns
        (statistics, loss terms)."""
        ac = self.cfg.algorithm
        losses: dict[str, float] = {}
        logp, ent = self._logprobs(self.train_model, u.tensors, idx, entropy=True)
        mmask = u.mask[idx].to(self.device)
        old = u.old_logp[idx].to(self.device) if u.old_logp is not None else logp.detach()
        is_weights, is_stats = self._micro_is_weights(u, idx, old, mmask)
        out = ca.compute_policy_loss(
            ac.policy_loss,
            logp,
            old,
            u.advantages[idx].to(self.device),
            mmask,
            clip_ratio_low=ac.clip_ratio_low,
            clip_ratio_high=ac.clip_ratio_high,
            loss_agg_mode=ac.loss_agg_mode,
            is_weights=is_weights,
            **({"clip_ratio_c": ac.clip_ratio_c} if ac.policy_loss == "ppo" else {}),
            **agg,
        )
        loss = out.loss
        stats = {**out.stats, **is_stats}
        if u.ref_logp is not None:
            kl_tok = ca.kl_penalty(logp, u.ref_logp[idx].to(self.device), ac.kl_estimator)
            if mmask.any():
                stats["kl"] = float(ca.masked_mean(kl_tok.detach(), mmask))
            if not ac.use_kl_in_reward:
                kl_loss = ca.agg_loss(kl_tok * mmask, mmask, ac.loss_agg_mode, **agg)
                loss = loss + self.kl_ctrl.value * kl_loss
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

    def _micro_is_weights(
        self, u: UpdateBatch, idx: torch.Tensor, old: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor | None, dict[str, float]]:
        """The micro-batch's rollout IS weights: the update's (computed over the batch), or with
        ``is_per_micro_batch`` from its own pi_old ``old`` (the statistics then cover the samples in the
        update)."""
        if not u.is_per_micro_batch:
            return (u.is_weights[idx].to(self.device) if u.is_weights is not None else None), {}
        ac = self.cfg.algorithm
        rollout = u.tensors["rollout_logprobs"][idx].to(self.device)
        weights, _, stats = ca.rollout_importance_weights(
            old, rollout, mask, cap=ac.rollout_is_cap, level=ac.rollout_is
        )
        return weights, stats

    def _value_micro_loss(
        self, u: UpdateBatch, idx: torch.Tensor, agg: dict[str, Any]
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Forward + backward of PPO's clipped value loss on one micro-batch."""
        ac = self.cfg.algorithm
        values = self._values(u.tensors, idx)
        vloss, vstats = ca.ppo_value_loss(
            values,
            u.old_values[idx].to(self.device),
            u.returns[idx].to(self.device),
            u.mask[idx].to(self.device),
            cliprange_value=ac.cliprange_value,
            loss_agg_mode=ac.loss_agg_mode,
            **agg,
        )
        (ac.vf_coef * vloss).backward()
        return {"vf_clipfrac": vstats["vf_clipfrac"]}, {"value_loss": vloss.item()}

    # -- evaluation -------------------------------------------------------------------------------------------
    def evaluate(self, records: Sequence[Record] | None = None) -> dict[str, Any]:
        """Greedy pass@1 on held-out prompts with the first reward source's verdict; a completion cut at
        ``max_new_tokens`` never counts as solved (``eval/truncated`` is their share)."""
        records = list(records if records is not None else self.eval_records)
        if not records:
            return {}
        rc = self.cfg.rollout
        records = [self._with_budget(r, None, largest=True) for r in records]
        groups = self._generate(
            records,
            SamplingParams(n=1, temperature=0.0, max_new_tokens=rc.max_new_tokens, stop=list(rc.stop)),
        )
        scored_records = [
            Record(id=r.id, prompt=r.prompt, completion=g[0].text, reference=r.reference, verifier=r.verifier)
            for r, g in zip(records, groups, strict=True)
        ]
        first = RewardSources([self.reward_pipeline.sources.sources[0]])
        with self._score_lock:
            scored = first.score(scored_records)
        finished = [not g[0].truncated for g in groups]
        solved = sum(c and f for c, f in zip(scored.correct, finished, strict=True))
        return {
            "eval/pass@1": solved / len(records),
            "eval/truncated": 1 - sum(finished) / len(records),
            "eval/num": len(records),
        }

    # -- state ------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        state = {
            "optimizer": parallel.optimizer_state_dict(self.policy, self.opt),
            "scheduler": self.sched.state_dict(),
            "data_epoch": self._trained_position[0],
            "data_index": self._trained_position[1],
            "num_tokens": self.num_tokens,
            "num_completion_tokens": self.num_completion_tokens,
            "kl_coef": self.kl_ctrl.value,
        }
        if self.prompt_filter is not None:
            state["prompt_filter"] = self.prompt_filter.state_dict()
        if self.value_opt is not None:
            state["value_optimizer"] = parallel.optimizer_state_dict(self.value, self.value_opt)
            state["value_scheduler"] = self.value_sched.state_dict()
        return state

    @property
    def _sharded(self) -> bool:
        """FSDP: saving, loading and generating are collectives every rank takes part in."""
        return parallel.is_sharded(self.policy)

    def checkpoints(self, run_dir: str | Path | None = None) -> CheckpointManager:
        """The run's checkpoint folder (``RUN_DIR/checkpoints``)."""
        return CheckpointManager(run_dir or self.cfg.run.output_dir, keep=self.cfg.run.keep_checkpoints)

    def save(self, run_dir: str | Path | None = None) -> Path:
        """Writes ``checkpoints/step-N`` (``policy/``, ``value/`` for PPO, ``trainer_state.pt``, config). With
        LoRA ``policy/`` is the merged model (loads with ``from_pretrained``) and ``adapter/`` the adapter.
        Under FSDP every rank calls it: weights and optimiser state are gathered to rank 0, which writes."""
        models = lora.checkpoint_models("policy", self.policy)
        if self.value is not None:
            models["value"] = parallel.unwrap(self.value)
        weights = {name: parallel.full_state_dict(m) for name, m in models.items()} if self._sharded else None
        state, manager = self.state_dict(), self.checkpoints(run_dir)
        if self.rank == 0:
            manager.save(
                self.step,
                models=models,
                state=state,
                tokenizer=self.tokenizer,
                config_yaml=dump_config(self.cfg),
                state_dicts=weights,
            )
        if self._sharded:
            parallel.barrier()  # every rank may read the checkpoint once save returns
        return manager.path(self.step)

    def load(self, checkpoint: str | Path) -> None:
        """Restores a checkpoint in place: weights, optimisers, schedules, data position and RNG states."""
        checkpoint = Path(checkpoint)
        parallel.load_weights(self.policy, checkpoint / (lora.ADAPTER_DIR if self.lora else "policy"))
        state = load_state(checkpoint)
        parallel.load_optimizer_state_dict(self.policy, self.opt, state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        if self.value is not None:
            parallel.load_weights(self.value, checkpoint / "value")  # unwraps DDP
            parallel.load_optimizer_state_dict(self.value, self.value_opt, state["value_optimizer"])
            self.value_sched.load_state_dict(state["value_scheduler"])
        self.step = state["step"]
        self.data_epoch = state["data_epoch"]
        self.data_index = state["data_index"]
        self.num_tokens = state.get("num_tokens", 0)
        self.num_completion_tokens = state.get("num_completion_tokens", 0)
        self.kl_ctrl.value = state.get("kl_coef", self.kl_ctrl.value)
        if self.prompt_filter is not None and "prompt_filter" in state:
            self.prompt_filter.load_state_dict(state["prompt_filter"])
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
        if main and cfg.run.log_completions:
            self.sample_logger = SampleLogger(run_dir / "rollouts.jsonl", resume_step=resume_step)
        last: dict[str, Any] = {}
        end = cfg.train.steps if steps is None else self.step + steps
        takes_part = main or self._sharded  # under FSDP evaluating and saving are collectives: every rank
        try:
            if self.step == 0 and self.eval_records and takes_part:
                first = self.evaluate()
                self.initial_eval = first
                if logger:
                    logger.log(0, first)
            if cfg.rollout.async_staleness and self.step < end:
                self._start_async(end)
            while self.step < end:
                metrics = self.train_step()
                if cfg.run.eval_every and self.step % cfg.run.eval_every == 0 and self.step < end:
                    metrics.update(self.evaluate())
                if self.step == end and self.eval_records:
                    metrics.update(self.evaluate())
                if logger:
                    logger.log(self.step, metrics)
                last = metrics
                if takes_part and cfg.run.save_every and self.step % cfg.run.save_every == 0:
                    self.save()
            if takes_part and (not cfg.run.save_every or self.step % cfg.run.save_every):
                self.save()
        finally:
            self._stop_async()
            if logger:
                logger.close()
            if self.sample_logger is not None:
                self.sample_logger.close()
                self.sample_logger = None
        return last

    def close(self) -> None:
        """Stops scoring workers and rollout engines."""
        self.reward_pipeline.close()
        if self.env is not None:
            self.env.close()
        with contextlib.suppress(Exception):
            if self.backend is not None and getattr(self.backend, "name", "") != "hf":
                self.backend.close()

    def __enter__(self) -> RLTrainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
