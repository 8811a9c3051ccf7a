"""Returns: reward-to-go along a sequence, per response token or per process-reward step."""

from __future__ import annotations

import torch


def discounted_returns(rewards: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0) -> torch.Tensor:
    """Reward-to-go along the last dimension: ``G_t = sum_{s >= t} gamma^(s - t) r_s`` over the masked
    positions (outside the mask rewards count as 0 and returns are 0).

    The one implementation of returns: per response token (REINFORCE++ and ``step_return`` advantages,
    ``mask`` = the response mask) and per step (:func:`step_returns`). With ``gamma = 1`` it is the sum of
    future rewards.
    """
    mask = mask.to(rewards.dtype)
    rewards = rewards * mask
    if gamma == 1.0:
        return torch.flip(torch.cumsum(torch.flip(rewards, [-1]), -1), [-1]) * mask
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in reversed(range(rewards.shape[-1])):
        running = rewards[..., t] + gamma * running
        returns[..., t] = running
    return returns * mask
