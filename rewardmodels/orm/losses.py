"""Outcome reward model losses as pure functions of the model's scalar rewards."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def bradley_terry_loss(
    chosen: torch.Tensor,
    rejected: torch.Tensor,
    margin: torch.Tensor | None = None,
    center_coefficient: float | None = None,
) -> torch.Tensor:
    """Pairwise Bradley-Terry loss (Ouyang et al., 2022; TRL's ``RewardTrainer``).

    ``L = mean_i[-log sigmoid(r_c,i - r_r,i - m_i)] + c * mean_i[(r_c,i + r_r,i)^2]``

    ``margin`` ``m_i`` (Llama 2's margin loss) demands that the chosen reward beat the rejected one by at
    least that much; the second term (reward centering, Eisenstein et al., 2023; TRL's
    ``center_rewards_coefficient``, e.g. 0.01) pulls rewards towards zero mean so that they are
    comparable across models. ``None`` / 0 disables it.
    """
    diff = chosen - rejected
    if margin is not None:
        diff = diff - margin.to(diff.dtype)
    loss = -F.logsigmoid(diff).mean()
    if center_coefficient:
        loss = loss + center_coefficient * torch.mean((chosen + rejected) ** 2)
    return loss


def pointwise_bce_loss(rewards: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Pointwise binary cross-entropy on logits: ``L = mean_i[-y_i log s(r_i) - (1 - y_i) log(1 - s(r_i))]``.

    ``labels`` may be soft (in [0, 1]).
    """
    return F.binary_cross_entropy_with_logits(rewards, labels.to(rewards.dtype))
