"""The RL step's update stage: from a scored rollout to new weights.

:meth:`PolicyUpdate.prepare` fills an :class:`~rewardlab.rl.batch.UpdateBatch` stage by stage (forward
passes without gradient for pi_old, the reference and the critic; with PRIME's implicit PRM, its process
rewards and its online update on the step's outcomes; token rewards with the KL penalty in the reward;
advantages; rollout importance weights); :meth:`PolicyUpdate.optimise` then takes
``epochs x minibatches`` optimiser steps, each accumulating gradients over micro-batches with the loss
normalised by the token / sequence count of the whole optimiser step. The math is
:mod:`rewardlab.core_algos`'s.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

from rewardlab import core_algos as ca
from rewardlab.rl.batch import Rollout, UpdateBatch, UpdateStats, build_tensors
from rewardlab.rl.config import RLConfig
from rewardlab.rl.forward import ForwardPasses
from rewardlab.rl.policy import Models
from rewardlab.rl.rewards import RewardPipeline
from rewardlab.training import build_optimizer, build_scheduler, lora, parallel
from rewardlab.training.optim import optimizer_step

__all__ = ["Optimisers", "PolicyUpdate", "build_optimisers", "needs_source_rewards"]


@dataclass
class Optimisers:
    """The policy's (and PPO critic's) optimiser and schedule, and the KL coefficient's controller."""

    kl_ctrl: Any
    opt: torch.optim.Optimizer
    sched: Any
    value_opt: torch.optim.Optimizer | None = None
    value_sched: Any | None = None


def build_optimisers(cfg: RLConfig, policy: Any, value: Any | None) -> Optimisers:
    """AdamW and the learning-rate schedule of ``train`` for the policy and, when there is one, the critic."""
    tc, ac = cfg.train, cfg.algorithm
    kl_ctrl = ca.kl_controller(ac.kl_ctrl, ac.kl_coef, target=ac.kl_target, horizon=ac.kl_horizon)
    opt = build_optimizer(
        policy.parameters(),
        lr=tc.learning_rate,
        betas=(tc.adam_beta1, tc.adam_beta2),
        weight_decay=tc.weight_decay,
    )
    out = Optimisers(kl_ctrl, opt, _scheduler(cfg, opt))
    if value is not None:
        # weight decay 0.01: torch's AdamW default, which the critic has always used (verl's too)
        out.value_opt = build_optimizer(
            value.parameters(), lr=tc.value_lr, betas=(tc.adam_beta1, tc.adam_beta2), weight_decay=0.01
        )
        out.value_sched = _scheduler(cfg, out.value_opt)
    return out


def _scheduler(cfg: RLConfig, optimizer: torch.optim.Optimizer) -> Any:
    tc = cfg.train
    total = max(1, tc.max_steps * tc.epochs * tc.minibatches)
    return build_scheduler(optimizer, tc.lr_scheduler_type, warmup_steps=tc.warmup_steps, total_steps=total)


def needs_source_rewards(cfg: RLConfig) -> bool:
    """Whether the advantage estimator reads each reward source's rewards apart (GDPO)."""
    return ca.estimator_traits(cfg.algorithm.adv_estimator).needs_source_rewards


class PolicyUpdate:
    """One policy (and critic) update on a rollout; ``dist``: under torchrun, ``world`` processes."""

    def __init__(
        self,
        cfg: RLConfig,
        models: Models,
        optimisers: Optimisers,
        passes: ForwardPasses,
        reward_pipeline: RewardPipeline,
        *,
        dist: bool,
        world: int,
    ) -> None:
        self.cfg = cfg
        self.models = models
        self.optim = optimisers
        self.passes = passes
        self.reward_pipeline = reward_pipeline
        self.device = passes.device
        self.dist = dist
        self.world = world

    @property
    def single_pass(self) -> bool:
        """One optimiser step per rollout: the update's first forward pass is pi_old, nothing to store."""
        return self.cfg.train.epochs * self.cfg.train.minibatches == 1

    # -- before the optimiser steps ------------------------------------------------------------------------
    def prepare(self, r: Rollout, step: int) -> tuple[UpdateBatch, dict[str, Any]]:
        """The update's batch with every stage before the optimiser steps done, and their metrics."""
        m: dict[str, Any] = {}
        u = self.batch(r, step)
        self.reference_passes(u)
        process = self.implicit_process_rewards(u, r, m)
        self.token_rewards(u, r, m)
        self.advantages(u, r, process)
        self.importance_weights(u, m)
        return u, m

    def batch(self, r: Rollout, step: int) -> UpdateBatch:
        """The rollout's tensors and loss mask (samples the pipeline kept, with a reward)."""
        tensors = build_tensors(r.gens, self.models.tokenizer.pad_token_id)
        mask = ca.apply_sample_mask(tensors["loss_mask"], (r.keep & r.valid).float())
        return UpdateBatch(tensors, mask, step)

    def reference_passes(self, u: UpdateBatch) -> None:
        """pi_old (when the update makes more than one pass, or the rollout's own is trusted), the reference
        policy's log-probs (KL) and the critic's values (PPO), all without gradient."""
        ac, models = self.cfg.algorithm, self.models
        if not ac.recompute_old_logprobs:
            u.old_logp = u.tensors["rollout_logprobs"]
        elif not self.single_pass:
            u.old_logp = self.passes.no_grad_logprobs(models.policy, u.tensors)
        if models.ref is not None:
            with lora.adapters_disabled(models.ref):  # LoRA: the policy without its adapters
                u.ref_logp = self.passes.no_grad_logprobs(models.ref, u.tensors)
        if models.value is not None:
            u.old_values = self.passes.no_grad_values(models.value, u.tensors)

    def implicit_process_rewards(self, u: UpdateBatch, r: Rollout, m: dict[str, Any]) -> torch.Tensor | None:
        """PRIME (``reward.process: implicit_prm``), in the order of its trainer (PRIME-RL/PRIME
        ``ray_trainer.py``: reference log-probs, then ``compute_rm_score``, then the advantages): the implicit
        PRM scores the samples and, with ``reward.implicit_prm_update``, takes its optimiser step(s) on their
        outcome labels (reward > 0; the samples in the loss), the scores read before each step
        (``update: after``); returns its process rewards after PRIME's granularity and norm, ``None``
        without an implicit PRM."""
        prm, rw = self.reward_pipeline.implicit_prm, self.cfg.reward
        if prm is None:
            return None
        tensors = u.tensors
        labels = (r.rewards > 0).float()
        raw, stats = prm.score_and_update(
            tensors["input_ids"],
            tensors["attention_mask"],
            tensors["response_mask"],
            labels,
            r.valid & r.keep,
        )
        m.update(stats)
        return ca.prime_token_rewards(
            raw, u.mask, granularity=rw.implicit_prm_granularity, norm=rw.implicit_prm_norm
        )

    def token_rewards(self, u: UpdateBatch, r: Rollout, m: dict[str, Any]) -> None:
        """The reward pipeline's token rewards, then the KL penalty in the reward (REINFORCE++, RLOO, PPO)."""
        ac = self.cfg.algorithm
        u.token_rewards, stats = self.reward_pipeline.token_rewards(
            r.reward, u.tensors["response_mask"], u.mask, [g.token_ids for g in r.gens]
        )
        m.update(stats)
        if ac.use_kl_in_reward and u.ref_logp is not None:
            base = u.old_logp
            if base is None:
                base = self.passes.no_grad_logprobs(self.models.policy, u.tensors)
            if u.old_logp is None and not self.single_pass:
                u.old_logp = base
            u.token_rewards, kstats = ca.apply_kl_penalty(
                u.token_rewards, base, u.ref_logp, u.mask, self.optim.kl_ctrl.value, ac.kl_estimator
            )
            m["kl"] = kstats["kl"]

    def advantages(self, u: UpdateBatch, r: Rollout, process: torch.Tensor | None = None) -> None:
        """The estimator's advantages (and the critic's returns), reweighted by sign when asked; ``process``:
        token-level process rewards kept apart from the outcome (PRIME's implicit PRM)."""
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
            process_rewards=process,
            rm_coef=ac.prime_rm_coef,
            outcome_coef=ac.prime_outcome_coef,
        )
        if needs_source_rewards(self.cfg):
            inputs.source_rewards, inputs.source_weights = self.reward_pipeline.source_rewards(r.reward)
        u.advantages, u.returns = inputs.estimate(ac.adv_estimator)
        if self.cfg.rollout.tree.roots:
            self._tree_advantages(u, r)
        if ac.positive_adv_weight != 1.0 or ac.negative_adv_weight != 1.0:
            u.advantages = ca.reweight_advantages(
                u.advantages, positive_weight=ac.positive_adv_weight, negative_weight=ac.negative_adv_weight
            )

    def _tree_advantages(self, u: UpdateBatch, r: Rollout) -> None:
        """Tree rollouts: Tree-GRPO's intra-tree term (``rollout.tree.intra_tree_coef``), then the weights that
        train each shared prefix once (:func:`core_algos.shared_prefix_weights`)."""
        tree, ac, n = self.cfg.rollout.tree, self.cfg.algorithm, self.cfg.rollout.n
        if tree.intra_tree_coef:
            scores = (u.token_rewards * u.tensors["response_mask"]).sum(-1)
            intra = ca.tree_intra_advantages(
                scores,
                1 + tree.points * tree.branches,
                valid=r.valid & r.keep,
                eps=ac.adv_eps,
                scale="none" if ac.adv_scale == "none" else "group",
            )
            u.advantages = u.advantages + tree.intra_tree_coef * intra[:, None] * u.mask
        root = torch.tensor([(i // n) * n + g.branch[0] if g.branch else i for i, g in enumerate(r.gens)])
        shared = torch.tensor([g.branch[1] if g.branch else 0 for g in r.gens])
        per_token = torch.ones(u.size)
        if ca.aggregation_traits(ac.loss_agg_mode).length_normalised:
            per_token = 1.0 / u.mask.sum(-1).clamp(min=1)
        u.advantages, u.token_weights = ca.shared_prefix_weights(
            u.advantages, u.mask, root, shared, per_token_of_sample=per_token
        )

    def importance_weights(self, u: UpdateBatch, m: dict[str, Any]) -> None:
        """Truncated IS weights for the rollout engine / trainer mismatch (``algorithm.rollout_is``)."""
        ac = self.cfg.algorithm
        if ac.rollout_is == "none":
            return
        if u.old_logp is None and not ac.rollout_is_mask:
            u.is_per_micro_batch = True  # single pass: the micro-batch's own forward pass is pi_old
            return
        if u.old_logp is None:
            u.old_logp = self.passes.no_grad_logprobs(self.models.policy, u.tensors)
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

    # -- the optimiser steps -------------------------------------------------------------------------------
    def optimise(self, u: UpdateBatch) -> dict[str, Any]:
        """``epochs x minibatches`` optimiser steps; returns the update's metrics."""
        tc = self.cfg.train
        self.models.train_model.train()
        m: dict[str, Any] = {}
        acc = UpdateStats()
        active = self._active_samples(u, m)
        gen = torch.Generator().manual_seed(tc.seed * 31 + u.step)
        mb_count = max(1, min(tc.minibatches, u.size))
        for _epoch in range(tc.epochs):
            perm = torch.randperm(u.size, generator=gen) if mb_count > 1 else torch.arange(u.size)
            for mb in torch.tensor_split(perm, mb_count):
                self._minibatch_step(u, mb, active, acc)
        m.update(acc.means(tc.epochs * mb_count))
        m["learning_rate"] = self.optim.sched.get_last_lr()[0]
        m["advantages/mean"] = float(ca.masked_mean(u.advantages, u.mask)) if u.mask.any() else 0.0
        m["advantages/abs_mean"] = float(ca.masked_mean(u.advantages.abs(), u.mask)) if u.mask.any() else 0.0
        m["num_loss_tokens"] = int(u.mask.sum())
        return m

    def _active_samples(self, u: UpdateBatch, m: dict[str, Any]) -> torch.Tensor:
        """Samples whose forward/backward can change the gradient.

        A sample whose loss tokens all have advantage 0 adds exactly nothing to the gradient when the loss has
        no KL or entropy term and there is no value model (GRPO's all-equal groups). Its forward/backward is
        skipped; the normalisers still count its tokens, so the gradient is the same as with it. (Not under
        data parallelism: every rank must run the same backward passes; nor when a token's loss reads the
        other tokens of its micro-batch: the covariance losses, the entropy quantile.)"""
        ac = self.cfg.algorithm
        prunable = (
            self.cfg.train.skip_zero_advantage
            and (self.models.ref is None or ac.use_kl_in_reward)
            and ac.entropy_coef == 0
            and self.models.value is None
            and not self.dist
            and not ca.policy_loss_traits(ac.policy_loss).batch_dependent
            and ac.top_entropy_quantile == 1.0
        )
        active = (
            (u.advantages * u.mask).abs().sum(-1) > 0 if prunable else torch.ones(u.size, dtype=torch.bool)
        )
        m["samples/skipped_zero_advantage"] = int((~active & (u.mask.sum(-1) > 0)).sum())
        return active

    def _aggregation(self, mb_mask: torch.Tensor) -> dict[str, Any]:
        """The loss normalisers of one optimiser step (token and sequence counts, summed over ranks), so
        that micro-batch losses add up to the step's loss whatever the accumulation."""
        num_tokens, num_seqs = ca.batch_counts(mb_mask)
        if ca.aggregation_traits(self.cfg.algorithm.loss_agg_mode).counts_masked_samples:
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
        self, u: UpdateBatch, mb: torch.Tensor, active: torch.Tensor, acc: UpdateStats
    ) -> None:
        """Gradient accumulation over the minibatch's micro-batches, then one optimiser step (policy and
        critic)."""
        tc, models, optim = self.cfg.train, self.models, self.optim
        agg = self._aggregation(u.mask[mb])
        optim.opt.zero_grad(set_to_none=True)
        if optim.value_opt is not None:
            optim.value_opt.zero_grad(set_to_none=True)
        live = mb[active[mb]]
        micro = self.passes.micro_batches(u.tensors, live)
        for k, idx in enumerate(micro):
            last = k == len(micro) - 1
            with self._no_sync(models.train_model, last):
                stats, losses = self._micro_loss(u, idx, agg, acc)
            acc.add(stats, losses, len(idx))
            if models.value is not None:
                with self._no_sync(models.value, last):
                    stats, losses = self._value_micro_loss(u, idx, agg)
                acc.add(stats, losses, len(idx))
        for p in models.policy.parameters():
            if p.grad is None and p.requires_grad:
                # A minibatch with nothing to learn still takes its optimiser step (zero gradient: Adam's
                # moments decay as they would have), so skipping changes no later update.
                p.grad = torch.zeros_like(p)
        acc.grad_norms.append(
            optimizer_step(models.policy.parameters(), optim.opt, optim.sched, tc.max_grad_norm)
        )
        if optim.value_opt is not None:
            optimizer_step(models.value.parameters(), optim.value_opt, optim.value_sched, tc.max_grad_norm)

    def _no_sync(self, model: Any, last: bool) -> Any:
        """No gradient communication on every micro-batch but the last (DDP's ``no_sync``, FSDP's
        ``set_requires_gradient_sync(False)``): one reduction per optimiser step."""
        return parallel.no_sync(model) if self.dist and not last else contextlib.nullcontext()

    def _micro_loss(
        self, u: UpdateBatch, idx: torch.Tensor, agg: dict[str, Any], acc: UpdateStats
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Forward + backward of the policy loss (plus KL / entropy terms) on one micro-batch; returns
        (statistics, loss terms) and keeps its token entropies in ``acc``."""
        ac = self.cfg.algorithm
        losses: dict[str, float] = {}
        logp, ent = self.passes.logprobs(self.models.train_model, u.tensors, idx, entropy=True)
        mmask = u.mask[idx].to(self.device)
        old = u.old_logp[idx].to(self.device) if u.old_logp is not None else logp.detach()
        is_weights, is_stats = self._micro_is_weights(u, idx, old, mmask)
        if u.token_weights is not None:
            weights = u.token_weights[idx].to(self.device)
            is_weights = weights if is_weights is None else is_weights * weights
        if ent is not None:
            tokens = ent.detach()[mmask.bool()].float()
            acc.entropies.append(tokens.cpu())
            if ac.top_entropy_quantile < 1.0:
                is_weights = self._forking_tokens_only(ent, mmask, tokens, is_weights)
        traits = ca.policy_loss_traits(ac.policy_loss)
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
            **{name: getattr(ac, name) for name in traits.config_fields},
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
                loss = loss + self.optim.kl_ctrl.value * kl_loss
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

    def _forking_tokens_only(
        self, ent: torch.Tensor, mask: torch.Tensor, tokens: torch.Tensor, is_weights: torch.Tensor | None
    ) -> torch.Tensor:
        """``algorithm.top_entropy_quantile``: the policy-loss weights with every token below the entropy
        quantile of the micro-batch (``tokens``: its loss tokens' entropies, with all ranks' as TRL gathers
        them) set to 0; the loss's normaliser still counts them (TRL multiplies its per-token loss by the
        mask the same way)."""
        pooled = parallel.gather_variable(tokens)
        forking = ca.high_entropy_mask(ent, mask, self.cfg.algorithm.top_entropy_quantile, pooled=pooled)
        return forking.to(ent.dtype) if is_weights is None else is_weights * forking

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
        values = self.passes.values(self.models.value, u.tensors, idx)
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
