"""The math of RL for language models as pure tensor functions, in registries (the shape of verl's ``core_algos``).

Nothing here touches a model, an optimizer or a config object: every function takes tensors and plain
numbers and returns tensors (and, for losses, a dict of float statistics). The training loop composes them.
Group statistics, group normalisation and returns have their one home here (:mod:`.groups`, :mod:`.returns`):
reward shaping's ``group_norm`` (:mod:`rewardlab.rewardmodels.shaping`, a floor above) calls them too. Reward
transforms (DAPO's overlong penalty and filtering, ...) live in :mod:`rewardlab.rewardmodels.shaping.functional`.

Shapes and conventions
----------------------
* ``B`` samples (completions), ``T`` response tokens (right-padded); ``response_mask`` is ``(B, T)`` with 1 on
  tokens that enter the loss. Groups are **contiguous**: samples ``g*G .. g*G+G-1`` answer the same prompt
  (TRL's and verl's layout after ``repeat_interleave``).
* ``valid`` (``(B,)`` bool, optional) marks samples whose reward exists; a sample whose reward source returned
  ``None`` is excluded from its group's statistics and gets advantage exactly 0 (and should be removed from
  the loss mask with :func:`apply_sample_mask`).
* Log-probabilities are per-token ``log pi(y_t | x, y_<t)``, ``(B, T)``.

Modules
-------
``masked`` (masked reductions, token counts), ``groups`` (missing rewards, group statistics, dynamic
sampling), ``advantages`` (GRPO, Dr.GRPO, RLOO, REINFORCE++, GAE, signed REINFORCE; the dispatch and
:class:`AdvantageInputs`), ``passk``, ``gdpo``, ``step_return``, ``aggregation``, ``kl`` (estimators, loss and
reward terms, controllers), ``logits`` (log-probs, entropy, self-certainty), ``entropy`` (the high-entropy
token mask, entropy-collapse statistics), ``covariance`` (Clip-Cov, KL-Cov), ``tree`` (tree rollouts' branch
points, intra-tree advantages, shared-prefix loss weights), ``prime`` (PRIME's implicit process rewards,
implicit PRM loss and advantage), ``importance`` (rollout IS weights), ``losses`` (policy and value losses),
``registries``. Every public name is importable from this package, as when it was one module.

Registries and traits
---------------------
Each algorithm is registered once, next to its code, with its traits: what it needs and guarantees
(:class:`EstimatorTraits`: needs a critic, centres by group, zero advantage on a group of equal rewards,
needs per-source rewards; :class:`PolicyLossTraits`; :class:`AggregationTraits`). The loop and the config
check read the traits (:func:`estimator_traits`, ...), never a list of names. A taken name is refused unless
``override=True`` (:class:`rewardlab.registry.Registry`).

* :data:`ADVANTAGE_ESTIMATORS` -- ``grpo``, ``dr_grpo``, ``rloo``, ``reinforce_pp``, ``reinforce_pp_baseline``,
  ``gae``, ``step_return``, ``passk`` (Pass@k Training), ``grpo_passk`` (verl's max-minus-second), ``gdpo``
  (per-source normalisation), ``reinforce_signed`` (+1/-1, no baseline), ``prime`` (PRIME's RLOO on
  implicit process rewards and outcomes). Uniform signature ``fn(token_level_rewards, response_mask, **kw) ->
  (advantages, returns)``, both ``(B, T)``; outcome estimators sum the token rewards into one score per sample.
* :data:`POLICY_LOSSES` -- ``ppo`` (clipped surrogate, clip-higher, dual clip), ``gspo`` (sequence ratio),
  ``cispo`` (clipped importance weight), ``clip_cov`` and ``kl_cov`` (``covariance``: Cui et al., 2025).
* :data:`LOSS_AGG_MODES` -- ``token-mean``, ``seq-mean-token-mean``, ``seq-mean-token-sum``,
  ``seq-mean-token-sum-norm`` (Dr.GRPO's constant normaliser).
* :data:`KL_ESTIMATORS` -- ``k1``, ``k2``, ``k3`` (Schulman, "Approximating KL divergence", 2020).
* :data:`KL_CONTROLLERS` -- ``fixed``, ``adaptive`` (Ziegler et al., 2019).

Gradient accumulation
---------------------
Every aggregation takes ``global_num_tokens`` / ``global_num_seqs``: the token / sequence count of the whole
optimisation step (all accumulation micro-batches, all data-parallel ranks). Given these, the micro-batch
losses *sum* to the loss of the full batch, so ``loss.backward()`` per micro-batch with no further division
yields exactly the full-batch gradient, whatever the micro-batch lengths. Without them the count is the
micro-batch's own, which is right only when there is no accumulation. Use :func:`batch_counts` on the
whole step's masks to get the counts. Under DDP/FSDP (which *average* gradients over ranks) pass
``dp_size`` so that the average of the rank losses is the global loss.
"""

from __future__ import annotations

from .advantages import (
    ADV_SCALES,
    AdvantageInputs,
    compute_advantages,
    dr_grpo_advantage_estimator,
    gae_advantages,
    group_normalized_advantages,
    grpo_advantage_estimator,
    reinforce_pp_advantage_estimator,
    reinforce_pp_baseline_advantage_estimator,
    reinforce_signed_advantage_estimator,
    reweight_advantages,
    rloo_advantage_estimator,
    rloo_advantages,
)
from .aggregation import (
    agg_loss,
)
from .covariance import clip_cov_policy_loss, kl_cov_policy_loss, token_covariance
from .entropy import ENTROPY_PERCENTILES, NEAR_DETERMINISTIC_ENTROPY, entropy_stats, high_entropy_mask
from .gdpo import (
    gdpo_advantage_estimator,
    gdpo_advantages,
)
from .groups import (
    apply_sample_mask,
    dynamic_sampling_keep,
    frac_zero_std_groups,
    group_reward_std,
    optional_rewards,
)
from .importance import (
    IS_LEVELS,
    rollout_importance_weights,
)
from .kl import (
    KL_CONTROLLERS,
    AdaptiveKLController,
    FixedKLController,
    apply_kl_penalty,
    kl_controller,
    kl_k1,
    kl_k2,
    kl_k3,
    kl_loss_term,
    kl_penalty,
)
from .logits import (
    entropy_from_logits,
    logprobs_from_logits,
    self_certainty,
    self_certainty_from_hidden,
    token_logprobs_from_hidden,
)
from .losses import (
    PolicyLossOutput,
    cispo_policy_loss,
    compute_policy_loss,
    gspo_policy_loss,
    ppo_policy_loss,
    ppo_value_loss,
)
from .masked import (
    batch_counts,
    masked_mean,
    masked_sum,
    masked_var,
    masked_whiten,
)
from .passk import (
    grpo_passk_advantage_estimator,
    max_minus_second_advantages,
    passk_advantage_estimator,
    passk_advantages,
)
from .prime import (
    PRIME_GRANULARITIES,
    PRIME_LOSSES,
    PRIME_NORMS,
    implicit_outcome_logits,
    implicit_prm_loss,
    implicit_token_rewards,
    prime_advantage_estimator,
    prime_advantages,
    prime_token_rewards,
)
from .registries import (
    ADVANTAGE_ESTIMATORS,
    KL_ESTIMATORS,
    LOSS_AGG_MODES,
    POLICY_LOSSES,
    AggregationTraits,
    EstimatorTraits,
    PolicyLossTraits,
    advantage_estimator,
    aggregation_traits,
    estimator_traits,
    policy_loss_traits,
)
from .returns import discounted_returns
from .step_return import (
    STEP_BASELINES,
    step_return_advantages,
)
from .tree import (
    BRANCH_RULES,
    branch_positions,
    shared_prefix_weights,
    tree_intra_advantages,
)

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "ADV_SCALES",
    "BRANCH_RULES",
    "ENTROPY_PERCENTILES",
    "NEAR_DETERMINISTIC_ENTROPY",
    "AdaptiveKLController",
    "AdvantageInputs",
    "AggregationTraits",
    "EstimatorTraits",
    "FixedKLController",
    "IS_LEVELS",
    "KL_CONTROLLERS",
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "POLICY_LOSSES",
    "PRIME_GRANULARITIES",
    "PRIME_LOSSES",
    "PRIME_NORMS",
    "PolicyLossOutput",
    "PolicyLossTraits",
    "STEP_BASELINES",
    "advantage_estimator",
    "agg_loss",
    "aggregation_traits",
    "apply_kl_penalty",
    "apply_sample_mask",
    "batch_counts",
    "branch_positions",
    "cispo_policy_loss",
    "clip_cov_policy_loss",
    "compute_advantages",
    "compute_policy_loss",
    "discounted_returns",
    "dr_grpo_advantage_estimator",
    "dynamic_sampling_keep",
    "entropy_from_logits",
    "entropy_stats",
    "estimator_traits",
    "frac_zero_std_groups",
    "gae_advantages",
    "gdpo_advantage_estimator",
    "gdpo_advantages",
    "group_normalized_advantages",
    "group_reward_std",
    "grpo_advantage_estimator",
    "grpo_passk_advantage_estimator",
    "gspo_policy_loss",
    "high_entropy_mask",
    "implicit_outcome_logits",
    "implicit_prm_loss",
    "implicit_token_rewards",
    "kl_controller",
    "kl_cov_policy_loss",
    "kl_k1",
    "kl_k2",
    "kl_k3",
    "kl_loss_term",
    "kl_penalty",
    "logprobs_from_logits",
    "masked_mean",
    "masked_sum",
    "masked_var",
    "masked_whiten",
    "max_minus_second_advantages",
    "optional_rewards",
    "passk_advantage_estimator",
    "passk_advantages",
    "policy_loss_traits",
    "ppo_policy_loss",
    "ppo_value_loss",
    "prime_advantage_estimator",
    "prime_advantages",
    "prime_token_rewards",
    "reinforce_pp_advantage_estimator",
    "reinforce_pp_baseline_advantage_estimator",
    "reinforce_signed_advantage_estimator",
    "reweight_advantages",
    "rloo_advantage_estimator",
    "rloo_advantages",
    "rollout_importance_weights",
    "self_certainty",
    "self_certainty_from_hidden",
    "shared_prefix_weights",
    "step_return_advantages",
    "token_covariance",
    "token_logprobs_from_hidden",
    "tree_intra_advantages",
]
