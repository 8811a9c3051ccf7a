"""The RL training loop: rollout -> score -> shape -> advantages -> policy update, as a sequence of stages.

All the math lives in :mod:`rewardlab.core_algos` (advantages, losses, aggregation, KL, IS correction);
rewards come from one :class:`rewardlab.rl.rewards.RewardPipeline` (sources through
:class:`rewardlab.scoring.Scorer`, one warm pool for the run; every transform from
:mod:`rewardlab.rewardmodels.shaping`), called once per rollout and once per update. One step:

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

Each stage is a module of its own; :class:`RLTrainer` builds them and runs them in order:

- :mod:`rewardlab.rl.prompts`: the prompts, their resumable order through the prompt filter, their text (1);
- :mod:`rewardlab.rl.sampling`: generation, scoring, dynamic sampling, evaluation (1-3);
- :mod:`rewardlab.rl.async_sampler`: the rollout thread of asynchronous rollouts (1-2, ahead of the update);
- :mod:`rewardlab.rl.batch`: the rollout, its tensors, the update's batch (3-4);
- :mod:`rewardlab.rl.forward`: the forward passes (log-probs, entropies, values, micro-batches);
- :mod:`rewardlab.rl.update`: the update's stages and the optimisers (4-5);
- :mod:`rewardlab.rl.policy`: the models (policy, reference, critic, wrapping) and the rollout backend;
- :mod:`rewardlab.rl.run_log`: the step's metrics and ``rollouts.jsonl``'s rows (6).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from rewardlab import core_algos as ca
from rewardlab.envs import build_env
from rewardlab.rl.async_sampler import AsyncSampler
from rewardlab.rl.batch import Rollout, UpdateBatch, UpdateStats, build_tensors
from rewardlab.rl.config import RLConfig, dump_config, validate
from rewardlab.rl.forward import ForwardPasses
from rewardlab.rl.policy import ValueModel, build_backend, load_policy, setup_models
from rewardlab.rl.prompts import (
    PromptSource,
    build_curriculum_for,
    build_prompt_filter,
    load_prompt_records,
    prompt_text,
    with_budget,
    with_metadata,
)
from rewardlab.rl.rewards import RewardPipeline
from rewardlab.rl.run_log import (
    TokenCounts,
    rollout_metrics,
    sample_advantages,
    sample_rows,
    throughput_metrics,
)
from rewardlab.rl.sampling import Sampler
from rewardlab.rl.update import Optimisers, PolicyUpdate, build_optimisers
from rewardlab.training import CheckpointManager, MetricsLogger, lora, parallel
from rewardlab.training import device as dev
from rewardlab.training.checkpoint import load_state
from rewardlab.training.metrics import SampleLogger
from rewardlab.types import Record

__all__ = [
    "RLTrainer",
    "Rollout",
    "UpdateBatch",
    "UpdateStats",
    "ValueModel",
    "build_tensors",
    "load_policy",
    "load_prompt_records",
]


def _degenerate_step_is_idle(cfg: RLConfig, dist: bool) -> bool:
    """A step whose groups are all degenerate leaves the policy as it is: an estimator whose advantage is 0
    on a group of equal rewards (its trait ``zero_on_equal_rewards``), with no KL or entropy term, so its update can be skipped (not under data parallelism: every rank must take the
    same optimiser steps)."""
    ac = cfg.algorithm
    return (
        not dist
        and ca.estimator_traits(ac.adv_estimator).zero_on_equal_rewards
        and ac.kl_coef == 0
        and ac.entropy_coef == 0
    )


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
        self._setup_process()
        models = self.models = setup_models(cfg, model, tokenizer, self.device, self.dist)
        self.policy, self.ref, self.value, self.lora = models.policy, models.ref, models.value, models.lora
        self.tokenizer, self.pad_id = models.tokenizer, models.tokenizer.pad_token_id
        optimisers = build_optimisers(cfg, self.policy, self.value)
        self.opt, self.sched, self.kl_ctrl = optimisers.opt, optimisers.sched, optimisers.kl_ctrl
        self.value_opt, self.value_sched = optimisers.value_opt, optimisers.value_sched
        # difficulty and source, read once here, whether the records were loaded or given in code
        self.records = with_metadata(
            cfg, list(train_records) if train_records is not None else load_prompt_records(cfg)
        )
        if not self.records:
            raise ValueError("no training prompts")
        self.eval_records = with_metadata(
            cfg, list(eval_records) if eval_records is not None else load_prompt_records(cfg, eval_set=True)
        )
        self.passes = ForwardPasses(cfg, self.device, models.use_bf16)
        self.reward_pipeline = RewardPipeline.from_config(
            cfg,
            reward_fns,
            process_scorer,
            tokenizer=self.tokenizer,
            self_certainty=self._self_certainty,
            policy=self.policy,  # an implicit PRM without a path starts from it, before any update
        )
        self.prompt_filter = build_prompt_filter(cfg)
        self._build_stages(optimisers, backend, env)
        self.step = 0
        self.tokens = TokenCounts()
        self.initial_eval: dict[str, Any] = {}
        self.sample_logger: SampleLogger | None = None  # train() opens it on rank 0 (run.log_completions)
        self._sample_advantages: dict[int, float | None] = {}
        self._curriculum_states: list[dict[str, Any]] = []  # every rank's, under data parallelism

    def _setup_process(self) -> None:
        """Threads, the torchrun process group (``dist``, ``rank``, ``world``), the device, the global seeds."""
        cfg = self.cfg
        dev.set_threads(cfg.run.num_threads)
        self.dist = dev.init_distributed()
        self.device = dev.resolve_device(cfg.run.device)
        self.rank = torch.distributed.get_rank() if self.dist else 0
        self.world = torch.distributed.get_world_size() if self.dist else 1
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)

    def _build_stages(self, optimisers: Optimisers, backend: Any | None, env: Any | None) -> None:
        """The rollout backend and environment (the config's unless given), and the stages a step runs:
        the prompt source, the sampler, the update."""
        cfg = self.cfg
        backend = backend if backend is not None else build_backend(cfg, self.policy, self.tokenizer)
        if cfg.rollout.async_staleness and self.dist:
            raise ValueError(
                "rollout.async_staleness: asynchronous rollouts run on one process (no torchrun)"
            )
        env = env if env is not None else build_env(cfg.env)
        self.prompts = PromptSource(
            self.records,
            cfg,
            rank=self.rank,
            world=self.world,
            prompt_filter=self.prompt_filter,
            curriculum=build_curriculum_for(self.records, cfg, rank=self.rank, world=self.world),
        )
        self.sampler = Sampler(
            cfg,
            tokenizer=self.tokenizer,
            policy=self.policy,
            backend=backend,
            env=env,
            reward_pipeline=self.reward_pipeline,
            prompts=self.prompts,
            passes=self.passes,
            rank=self.rank,
        )
        self.updater = PolicyUpdate(
            cfg, self.models, optimisers, self.passes, self.reward_pipeline, dist=self.dist, world=self.world
        )
        self.async_sampler = AsyncSampler(self.sampler)

    @property
    def backend(self) -> Any:
        """The rollout backend (the sampler's; the update releases its memory and pushes weights to it)."""
        return self.sampler.backend

    @backend.setter
    def backend(self, backend: Any) -> None:
        self.sampler.backend = backend

    @property
    def env(self) -> Any | None:
        """The environment of multi-turn episodes (the sampler's; ``None``: single completions)."""
        return self.sampler.env

    @env.setter
    def env(self, env: Any | None) -> None:
        self.sampler.env = env

    # -- one step ---------------------------------------------------------------------------------------------
    def train_step(self) -> dict[str, Any]:
        """Generates, scores and updates once; returns the step's metrics."""
        timings = {"generate": 0.0, "score": 0.0, "train": 0.0}
        t_step = time.perf_counter()
        metrics: dict[str, Any] = {}
        self._sample_advantages = {}
        if self.async_sampler.running:  # the rollout thread's batch
            rollout = self.async_sampler.take(self.step, timings, metrics)
        else:
            rollout = self._rollout(self.prompts.draw(self.cfg.train.prompts_per_step), 0, timings)
        train_rollout, all_parts, degenerate = self._groups_to_train(rollout, timings, metrics)
        if train_rollout is None and self.dist:
            train_rollout = rollout  # every rank must take part in the same optimiser steps
        if train_rollout is None or (degenerate and _degenerate_step_is_idle(self.cfg, self.dist)):
            metrics["skipped_update"] = 1
            metrics["learning_rate"] = self.sched.get_last_lr()[0]
        else:
            t0 = time.perf_counter()
            metrics.update(self._update(train_rollout))
            timings["train"] += time.perf_counter() - t0
        self.step += 1
        self.async_sampler.publish(self.step)
        if self.sample_logger is not None:
            # dynamic sampling: the first round is logged; its dropped groups have no advantage
            self.sample_logger.log(self._sample_rows(rollout))
        step_s = time.perf_counter() - t_step
        metrics.update(throughput_metrics(all_parts, timings, step_s, self.tokens, self.prompts.progress))
        if self.prompt_filter is not None:
            metrics.update(self.prompt_filter.metrics())
        metrics.update(self.prompts.metrics())
        if self.dist and self.prompts.curriculum is not None:
            # only rank 0 writes checkpoints: it holds every rank's curriculum state from the last step
            self._curriculum_states = parallel.gather_objects([self.prompts.state_dict()["curriculum"]])
        return metrics

    def _rollout(
        self,
        prompts: list[Record],
        round_: int,
        timings: dict[str, float],
        *,
        step: int | None = None,
        backend: Any | None = None,
    ) -> Rollout:
        """The sampler's rollout of ``prompts``, seeded by ``step`` (the current step by default)."""
        step = self.step if step is None else step
        return self.sampler.rollout(prompts, round_, timings, step=step, backend=backend)

    def _groups_to_train(
        self, rollout: Rollout, timings: dict[str, float], metrics: dict[str, Any]
    ) -> tuple[Rollout | None, list[Rollout], bool]:
        """The groups the update trains on (dynamic sampling's selection, ``None`` when it kept none), every
        rollout generated, and whether every group is degenerate; logs the rollouts' metrics."""
        ac, n = self.cfg.algorithm, self.cfg.rollout.n
        zero_std = ca.frac_zero_std_groups(rollout.rewards, n, rollout.valid)
        if ac.dynamic_sampling:
            train_rollout, all_parts = self.sampler.dynamic_sampling(rollout, self.step, timings, metrics)
        else:
            train_rollout, all_parts = rollout, [rollout]
        everything = Rollout.concat(all_parts) if len(all_parts) > 1 else rollout
        metrics.update(rollout_metrics(everything, n))
        metrics.update(self.reward_pipeline.usage_metrics())  # a judge's requests, tokens, cost so far
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
        return train_rollout, all_parts, degenerate

    def _update(self, r: Rollout) -> dict[str, Any]:
        """One policy update on a rollout: forward passes without gradient, token rewards, advantages,
        importance weights (:meth:`PolicyUpdate.prepare`), then ``epochs x minibatches`` optimiser steps."""
        self.backend.release_memory()  # vLLM sleep mode: the engine's memory is the update's until update_weights
        u, m = self.updater.prepare(r, self.step)
        if self.sample_logger is not None:
            self._sample_advantages = sample_advantages(u, r)
        m.update(self.updater.optimise(u))
        self.backend.update_weights(self.policy)
        if "kl" in m:
            self.kl_ctrl.update(m["kl"], u.size)
        m["kl_coef"] = self.kl_ctrl.value
        return m

    def _sample_rows(self, r: Rollout) -> list[dict[str, Any]]:
        """``rollouts.jsonl``'s rows of this step (the advantages are those :meth:`_update` stashed)."""
        n, limit = self.cfg.rollout.n, self.cfg.run.log_completions
        advantages = self._sample_advantages
        return sample_rows(
            r, step=self.step, n=n, limit=limit, prompt_text=self._prompt_text, advantages=advantages
        )

    def _self_certainty(self, records: Sequence[Record]) -> list[float]:
        """The ``self_certainty`` reward source's scores (the sampler knows which model sampled ``records``)."""
        return self.sampler.self_certainty(records)

    # -- evaluation -------------------------------------------------------------------------------------------
    def evaluate(self, records: Sequence[Record] | None = None) -> dict[str, Any]:
        """Greedy pass@1 on held-out prompts with the first reward source's verdict; a completion cut at
        ``max_new_tokens`` never counts as solved (``eval/truncated`` is their share)."""
        return self.sampler.evaluate(records if records is not None else self.eval_records, self.step)

    # -- state ------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        data = self.async_sampler.trained_state
        state = {
            "optimizer": parallel.optimizer_state_dict(self.policy, self.opt),
            "scheduler": self.sched.state_dict(),
            "data_epoch": data["epoch"],
            "data_index": data["index"],
            "num_tokens": self.tokens.num_tokens,
            "num_completion_tokens": self.tokens.num_completion_tokens,
            "kl_coef": self.kl_ctrl.value,
        }
        if self.prompt_filter is not None:
            state["prompt_filter"] = self.prompt_filter.state_dict()
        if "curriculum" in data:  # per rank: each draws its own shard with its own random stream
            state["curriculum"] = self._curriculum_states if self.dist else [data["curriculum"]]
        if self.value_opt is not None:
            state["value_optimizer"] = parallel.optimizer_state_dict(self.value, self.value_opt)
            state["value_scheduler"] = self.value_sched.state_dict()
        return {**state, **self.reward_pipeline.state_dict()}

    @property
    def _sharded(self) -> bool:
        """FSDP: saving, loading and generating are collectives every rank takes part in."""
        return parallel.is_sharded(self.policy)

    def checkpoints(self, run_dir: str | Path | None = None) -> CheckpointManager:
        """The run's checkpoint folder (``RUN_DIR/checkpoints``)."""
        return CheckpointManager(run_dir or self.cfg.run.output_dir, keep=self.cfg.train.save_total_limit)

    def save(self, run_dir: str | Path | None = None) -> Path:
        """Writes ``checkpoints/step-N`` (``policy/``, ``value/`` for PPO, ``implicit_prm/`` for PRIME,
        ``trainer_state.pt``, config). With LoRA ``policy/`` is the merged model (loads with
        ``from_pretrained``) and ``adapter/`` the adapter. Under FSDP every rank calls it: weights and
        optimiser state are gathered to rank 0, which writes."""
        models = lora.checkpoint_models("policy", self.policy)
        if self.value is not None:
            models["value"] = parallel.unwrap(self.value)
        models.update(self.reward_pipeline.checkpoint_models())  # an implicit PRM's trained model
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
        self.reward_pipeline.load_checkpoint(checkpoint, state)
        self.step = state["step"]
        self.prompts.seek(state["data_epoch"], state["data_index"])
        self.tokens = TokenCounts(state.get("num_tokens", 0), state.get("num_completion_tokens", 0))
        self.kl_ctrl.value = state.get("kl_coef", self.kl_ctrl.value)
        if self.prompt_filter is not None and "prompt_filter" in state:
            self.prompt_filter.load_state_dict(state["prompt_filter"])
        if self.prompts.curriculum is not None and "curriculum" in state:
            per_rank = state["curriculum"]
            self.prompts.curriculum.load_state_dict(per_rank[self.rank if len(per_rank) == self.world else 0])
        self.backend.update_weights(self.policy)

    # -- the loop ---------------------------------------------------------------------------------------------
    def train(self, *, resume: bool = False, steps: int | None = None) -> dict[str, Any]:
        """Runs ``train.max_steps`` steps (or ``steps`` more); returns the last step's metrics (with eval)."""
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
                report_to=cfg.train.report_to,
                config=cfg,  # what config.yaml holds: each tracker's run config
                resume_step=resume_step,
                log_every=cfg.train.logging_steps,
            )
            if main
            else None
        )
        if main and cfg.run.log_completions:
            self.sample_logger = SampleLogger(run_dir / "rollouts.jsonl", resume_step=resume_step)
        last: dict[str, Any] = {}
        end = cfg.train.max_steps if steps is None else self.step + steps
        takes_part = main or self._sharded  # under FSDP evaluating and saving are collectives: every rank
        try:
            if self.step == 0 and self.eval_records and takes_part:
                first = self.evaluate()
                self.initial_eval = first
                if logger:
                    logger.log(0, first)
            if cfg.rollout.async_staleness and self.step < end:
                self.async_sampler.start(self.step, end)
            while self.step < end:
                metrics = self.train_step()
                if cfg.train.eval_steps and self.step % cfg.train.eval_steps == 0 and self.step < end:
                    metrics.update(self.evaluate())
                if self.step == end and self.eval_records:
                    metrics.update(self.evaluate())
                if logger:
                    logger.log(self.step, metrics)
                last = metrics
                if takes_part and cfg.train.save_steps and self.step % cfg.train.save_steps == 0:
                    self.save()
            if takes_part and (not cfg.train.save_steps or self.step % cfg.train.save_steps):
                self.save()
        finally:
            self.async_sampler.stop()
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

    # -- the stages' entry points that tests and bench/ call on the trainer -------------------------------------
    def _prompt_text(self, record: Record) -> str:
        return prompt_text(self.cfg, self.tokenizer, record)

    def _with_budget(self, record: Record, step: int | None, *, largest: bool = False) -> Record:
        return with_budget(self.cfg, record, self.step if step is None else step, largest=largest)

    def _logprobs(
        self, model: Any, batch: dict[str, torch.Tensor], idx: torch.Tensor, *, entropy: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.passes.logprobs(model, batch, idx, entropy=entropy)

    def _micro_batches(self, batch: dict[str, torch.Tensor], rows: torch.Tensor) -> list[torch.Tensor]:
        return self.passes.micro_batches(batch, rows)
