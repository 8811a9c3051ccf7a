"""The implicit PRM inside an RL run: PRIME's online update (Cui et al., 2025, Algorithm 1).

Each RL step, :meth:`OnlineImplicitPRM.score_and_update` gives the sampled responses their token-level
implicit rewards and, with updates on, trains the PRM on the step's outcome labels, in PRIME's order
(``reward_model.prime_model.update: after``, the "single-forward" mode of github.com/PRIME-RL/PRIME,
``training/verl/workers/actor/dp_prime.py``, ``DataParallelPRIME.update_policy``): the batch is cut into
``minibatches`` in order; for each, every micro-batch's forward pass gives its token rewards (kept for the
advantages) and the cross-entropy loss of its outcome labels, whose gradients are accumulated, then one
clipped AdamW step. With one minibatch (the default) every reward is the PRM's before this step's update;
with several, a later minibatch is scored after the earlier ones' steps, as in PRIME. With updates off the
PRM only scores.

Metrics (over the samples in the PRM's loss, before the update): ``prime/rm_loss``, ``prime/rm_acc``
(``sigmoid(r_phi(y)) > 0.5`` against the label), ``prime/token_reward_mean`` (over response tokens) and, with
updates, ``prime/rm_grad_norm``.
"""

from __future__ import annotations

from typing import Any

import torch

from rewardlab.core_algos.prime import implicit_outcome_logits, implicit_prm_loss
from rewardlab.rewardmodels.implicit_prm.model import ImplicitPRM
from rewardlab.rewardmodels.orm.model import disable_dropout
from rewardlab.training.checkpoint import load_pretrained_weights
from rewardlab.training.device import autocast
from rewardlab.training.optim import build_optimizer, optimizer_step

__all__ = ["CHECKPOINT_NAME", "OnlineImplicitPRM"]

CHECKPOINT_NAME = "implicit_prm"
"""The PRM's folder in an RL checkpoint and its key in ``trainer_state.pt``."""


class OnlineImplicitPRM:
    """An :class:`ImplicitPRM` with its own AdamW, scored and updated once per RL step.

    Args:
        prm: The implicit PRM (trainable model and frozen reference), on the trainer's device.
        update: Train it on each step's outcome labels (PRIME's ``prime_model.update``); off: score only.
        learning_rate: AdamW's learning rate (PRIME's ``prime_model.optim.lr``: 1e-6), constant.
        grad_clip: Gradient norm clip of each step (PRIME's runs: 10.0).
        minibatches: Optimiser steps per RL step (the batch cut in order, as PRIME's mini-batches).
        micro_batch_size: Samples per forward/backward pass.
        loss_type: The loss of :func:`rewardlab.core_algos.prime.implicit_prm_loss` (``ce``).
        bf16: Forward passes under bf16 autocast.
        weight_decay: AdamW weight decay (PRIME's ``optim.weight_decay``: 0).
    """

    name = "implicit_prm"

    def __init__(
        self,
        prm: ImplicitPRM,
        *,
        update: bool = True,
        learning_rate: float = 1e-6,
        grad_clip: float = 10.0,
        minibatches: int = 1,
        micro_batch_size: int = 8,
        loss_type: str = "ce",
        bf16: bool = False,
        weight_decay: float = 0.0,
    ) -> None:
        self.prm = prm
        self.update = update
        self.grad_clip = grad_clip
        self.minibatches = max(1, minibatches)
        self.micro_batch_size = max(1, micro_batch_size)
        self.loss_type = loss_type
        self.bf16 = bf16
        disable_dropout(prm.model)  # the rewards of a sample are a function of its tokens, not of a mask
        self.optimizer = (
            build_optimizer(prm.parameters(), lr=learning_rate, weight_decay=weight_decay) if update else None
        )

    # ---- one RL step ------------------------------------------------------------------------------------
    def score_and_update(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        response_mask: torch.Tensor,
        labels: torch.Tensor,
        in_loss: torch.Tensor,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """``(token rewards (B, T) on the CPU, metrics)`` of one step's batch (the RL layout: responses in
        the last ``T`` columns); ``labels`` ``(B,)`` the 0/1 outcomes, ``in_loss`` ``(B,)`` the samples the
        PRM learns from (the others are scored only)."""
        rewards = torch.zeros(response_mask.shape, dtype=torch.float32)
        losses: list[tuple[float, int]] = []
        grad_norms: list[float] = []
        self.prm.model.train(self.update)
        for minibatch in torch.tensor_split(torch.arange(input_ids.shape[0]), self.minibatches):
            if self.optimizer is not None:
                self.optimizer.zero_grad(set_to_none=True)
            counted = int(in_loss[minibatch].sum())
            with torch.set_grad_enabled(self.update):
                for idx in torch.split(minibatch, self.micro_batch_size):
                    scored, loss, n = self._micro_batch(
                        input_ids, attention_mask, response_mask, labels, in_loss, idx
                    )
                    rewards[idx] = scored
                    if n:
                        losses.append((float(loss.detach()), n))
                        if self.update:
                            (loss * (n / counted)).backward()
            if self.optimizer is not None and counted:
                grad_norms.append(self._optimizer_step())
        self.prm.model.eval()
        return rewards, self._metrics(rewards, response_mask, labels, in_loss, losses, grad_norms)

    def _micro_batch(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        response_mask: torch.Tensor,
        labels: torch.Tensor,
        in_loss: torch.Tensor,
        idx: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor | None, int]:
        """One forward pass: the micro-batch's token rewards (detached, on the CPU), the mean loss over its
        samples in the loss (``None`` when there are none) and their count."""
        device = self.prm.device
        with autocast(device, self.bf16):
            token_rewards = self.prm.token_rewards(
                input_ids[idx].to(device), attention_mask[idx].to(device), response_mask[idx].to(device)
            )
        scored = token_rewards.detach().float().cpu()
        rows = in_loss[idx].bool()
        n = int(rows.sum())
        if not n:
            return scored, None, 0
        keep = rows.to(device)
        loss = implicit_prm_loss(
            token_rewards[keep].float(),
            response_mask[idx].to(device)[keep],
            labels[idx].to(device)[keep].float(),
            loss_type=self.loss_type,
        )
        return scored, loss, n

    def _optimizer_step(self) -> float:
        params = self.prm.parameters()
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        return optimizer_step(params, self.optimizer, None, self.grad_clip)  # PRIME's PRM lr is constant

    @staticmethod
    def _metrics(
        rewards: torch.Tensor,
        response_mask: torch.Tensor,
        labels: torch.Tensor,
        in_loss: torch.Tensor,
        losses: list[tuple[float, int]],
        grad_norms: list[float],
    ) -> dict[str, float]:
        rows = in_loss.bool()
        if not rows.any():
            return {}
        mask = response_mask[rows].float()
        logits = implicit_outcome_logits(rewards[rows], mask)
        correct = (torch.sigmoid(logits) > 0.5) == (labels[rows] > 0.5)
        total = sum(n for _, n in losses)
        out = {
            "prime/rm_loss": sum(loss * n for loss, n in losses) / total,
            "prime/rm_acc": float(correct.float().mean()),
            "prime/token_reward_mean": float((rewards[rows] * mask).sum() / mask.sum().clamp(min=1)),
        }
        if grad_norms:
            out["prime/rm_grad_norm"] = sum(grad_norms) / len(grad_norms)
        return out

    # ---- checkpoints ------------------------------------------------------------------------------------
    def checkpoint_models(self) -> dict[str, Any]:
        """The trainable model as an RL checkpoint folder (the reference is rebuilt as the run started)."""
        return {CHECKPOINT_NAME: self.prm.model}

    def load_weights(self, folder: Any) -> None:
        """Loads a checkpoint's ``implicit_prm/`` folder into the trainable model, in place (the optimiser
        keeps its references to the weights)."""
        load_pretrained_weights(self.prm.model, folder)

    def state_dict(self) -> dict[str, Any]:
        """The optimiser's state (``trainer_state.pt``'s ``implicit_prm`` entry)."""
        return {"optimizer": self.optimizer.state_dict() if self.optimizer is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.optimizer is not None and state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])
