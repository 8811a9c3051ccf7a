"""KL estimators (Schulman's k1 / k2 / k3), the KL term of the loss, KL in the reward, KL coefficient
controllers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rewardlab.registry import Registry

from .masked import masked_mean
from .registries import KL_ESTIMATORS

Tensor = torch.Tensor


@KL_ESTIMATORS.register("k1")
def kl_k1(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    """k1 = ``log pi - log pi_ref`` (unbiased for KL(pi || ref) under samples of pi, high variance, can be < 0)."""
    return log_prob - ref_log_prob


@KL_ESTIMATORS.register("k2")
def kl_k2(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    """k2 = ``0.5 (log pi - log pi_ref)^2`` (biased, low variance; its gradient is the true KL gradient's)."""
    return 0.5 * (log_prob - ref_log_prob) ** 2


@KL_ESTIMATORS.register("k3")
def kl_k3(log_prob: Tensor, ref_log_prob: Tensor) -> Tensor:
    """k3 = ``exp(log ref - log pi) - (log ref - log pi) - 1`` (unbiased, >= 0, low variance; GRPO's and TRL's)."""
    d = ref_log_prob - log_prob
    return torch.exp(d) - d - 1


KL_ESTIMATORS.register("kl", kl_k1)
KL_ESTIMATORS.register("mse", kl_k2)
KL_ESTIMATORS.register("low_var_kl", kl_k3)


def kl_penalty(
    log_prob: Tensor, ref_log_prob: Tensor, kind: str = "k3", clamp: float | None = None
) -> Tensor:
    """Per-token KL estimate ``(B, T)`` between the policy and the reference (Schulman 2020's k1/k2/k3).

    ``clamp`` bounds the estimate to ``[-clamp, clamp]`` (verl clamps k3 at 10 for stability; TRL does not).
    """
    kl = KL_ESTIMATORS.get(kind)(log_prob, ref_log_prob)
    return kl.clamp(-clamp, clamp) if clamp is not None else kl


def kl_loss_term(
    log_prob: Tensor,
    ref_log_prob: Tensor,
    *,
    kind: str = "k3",
    old_log_prob: Tensor | None = None,
    ratio_corrected: bool = False,
    clamp: float | None = None,
) -> Tensor:
    """Per-token KL term for the loss (GRPO: ``loss += beta * agg(KL)``), ``(B, T)``, differentiable.

    With ``ratio_corrected`` the estimate is multiplied by the (differentiable) ratio
    ``pi / pi_old = exp(log pi - log pi_old)``: DeepSeek-V3.2's unbiased reverse-KL gradient for
    off-policy samples (TRL's ``use_bias_correction_kl``, on by default in trl >= 1.x). It changes the gradient
    even on-policy, where the ratio's value is 1.
    """
    kl = kl_penalty(log_prob, ref_log_prob, kind, clamp=clamp)
    if ratio_corrected:
        if old_log_prob is None:
            raise ValueError("ratio_corrected needs old_log_prob")
        kl = kl * torch.exp(log_prob - old_log_prob)
    return kl


def apply_kl_penalty(
    token_level_scores: Tensor,
    log_prob: Tensor,
    ref_log_prob: Tensor,
    response_mask: Tensor,
    beta: float,
    kind: str = "k1",
) -> tuple[Tensor, dict[str, float]]:
    """KL in the reward (Ziegler et al., 2019; REINFORCE++, PPO-RLHF): ``r_t = score_t - beta * KL_t``.

    The KL is detached: it shapes the reward, the gradient comes through the advantages. Returns the token
    rewards and ``{"kl": mean KL over response tokens, "kl_coef": beta}``.
    """
    kl = kl_penalty(log_prob.detach(), ref_log_prob.detach(), kind) * response_mask
    rewards = token_level_scores - beta * kl
    return rewards, {"kl": float(masked_mean(kl, response_mask).item()), "kl_coef": float(beta)}


@dataclass
class FixedKLController:
    """Constant KL coefficient."""

    value: float = 0.0
    """The coefficient beta."""

    @classmethod
    def build(cls, coef: float, **_: Any) -> FixedKLController:
        """The controller of :func:`kl_controller` (the target and horizon do not apply)."""
        return cls(value=coef)

    def update(self, current_kl: float, n_steps: int) -> None:
        """No-op (the coefficient is fixed)."""


@dataclass
class AdaptiveKLController:
    """Adaptive KL coefficient (Ziegler et al., 2019, sec. 2.2): drives the observed KL toward ``target``.

    ``beta <- beta * (1 + clip((KL / target) - 1, -0.2, 0.2) * n_steps / horizon)``.
    """

    value: float = 0.1
    """Initial coefficient."""
    target: float = 6.0
    """Target KL (nats per sequence in the paper)."""
    horizon: int = 10000
    """Horizon in samples over which the error is corrected."""

    @classmethod
    def build(cls, coef: float, *, target: float, horizon: int) -> AdaptiveKLController:
        """The controller of :func:`kl_controller`."""
        return cls(value=coef, target=target, horizon=horizon)

    def update(self, current_kl: float, n_steps: int) -> None:
        """Updates ``value`` from the KL measured over ``n_steps`` samples."""
        error = min(max(current_kl / self.target - 1.0, -0.2), 0.2)
        self.value *= 1.0 + error * n_steps / self.horizon


KL_CONTROLLERS: Registry[type] = Registry("KL controller")
"""KL coefficient controllers by name (the config's ``algorithm.kl_ctrl``); each class has
``build(coef, *, target, horizon)``."""
KL_CONTROLLERS.register("fixed", FixedKLController)
KL_CONTROLLERS.register("adaptive", AdaptiveKLController)


def kl_controller(kind: str, coef: float, *, target: float, horizon: int) -> Any:
    """The KL controller ``kind`` (:data:`KL_CONTROLLERS`) starting at ``coef``."""
    if kind not in KL_CONTROLLERS:
        raise ValueError(f"unknown KL controller {kind!r} (known: {', '.join(KL_CONTROLLERS)})")
    return KL_CONTROLLERS.get(kind).build(coef, target=target, horizon=horizon)
