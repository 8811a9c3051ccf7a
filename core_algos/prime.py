"""PRIME's math: implicit process rewards, the implicit PRM's loss, and PRIME's RLOO advantage.

PRIME (Cui et al., 2025, "Process Reinforcement through Implicit Rewards", arXiv:2502.01456) trains an
implicit process reward model (Yuan et al., 2024, "Free Process Rewards without Process Labels") online from
outcome labels and gives the policy a dense reward on every response token,
``r_phi(y_t) = beta * log(pi_phi(y_t | y_<t) / pi_ref(y_t | y_<t))``. Its advantage is RLOO taken separately
on the process rewards and on the outcome rewards, the two combined with coefficients, summed into returns and
whitened over the batch.

Everything here mirrors the authors' released code (their formulas, constants and order of operations), which
``tests/prime_reference.py`` transcribes and ``tests/test_prime_formulas.py`` compares with:

* ``verl``'s ``recipe/prime`` (the PRIME team's port; volcengine/verl at 246cac4, unchanged in its formulas
  since the recipe landed in f0e7f9f): ``prime_core_algos.py`` (``compute_rloo_advantage_return``,
  ``compute_ce_dpo_loss_rm``, ``compute_detach_dpo_loss_rm``), ``prime_dp_rm.py`` (``q``, ``r = q * beta``,
  granularity, ``prime_norm``) and ``config/prime_trainer.yaml`` (the defaults);
* PRIME-RL/PRIME at 18ad596 (the paper's code): ``training/verl/workers/actor/dp_prime.py``
  (``compute_implicit_reward``, ``batch_norm``) and ``training/verl/trainer/ppo/core_algos.py``
  (``compute_rloo_returns``: one discount per reward source).

Where the two releases differ we follow the one that works and say so on the function: the ``whole``
granularity and the last token of the ``token`` granularity come from PRIME-RL/PRIME (verl's recipe raises on
``whole``, verl issue #1322, and leaves the last token's reward out of ``token``: ``drop_last_token=True``
reproduces it); ``beta`` sits in the token rewards as in the recipe (PRIME-RL/PRIME's rm scores are the raw
log-ratio, beta only in the loss: after ``batch_norm`` the two differ only in the 1e-6 guard).

What is ours and not PRIME's is bookkeeping: groups may be given by ids and be of any size (PRIME: contiguous
groups of ``n``), ``valid`` samples (a missing reward) are left out of the baselines and the whitening and get
advantage 0 (PRIME has no missing rewards), positions outside the mask are 0 in every output (verl's
``masked_whiten`` leaves ``-mean / std`` on padding, which its loss masks), and a group of one is refused
(PRIME divides by ``n - 1 = 0``).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from rewardlab.core_algos.estimators import advantage_estimator

from .groups import group_index as _group_rows
from .masked import _sequence_scores, masked_sum, masked_whiten
from .returns import discounted_returns

Tensor = torch.Tensor

PRIME_BETA = 0.05
"""The implicit PRM's beta (verl recipe ``reward_model.model.beta_train: 0.05``; PRIME-RL/PRIME
``reward_model.prime_model.beta_train=0.05`` in ``run_prime_main.sh``)."""
PRIME_RM_COEF = 5.0
"""Weight of the process rewards' RLOO term (verl recipe ``algorithm.reward_dpo_coef: 5``; PRIME-RL/PRIME
``reward_model.rm_coef=5`` in ``run_prime_main.sh``)."""
PRIME_OUTCOME_COEF = 5.0
"""Weight of the outcome rewards' RLOO term (verl recipe ``algorithm.reward_gt_coef: 5``; PRIME-RL/PRIME
``verifier.reward_coef: 5``)."""
PRIME_NORM_EPS = 1e-6
"""``batch_norm``'s guard: ``scores / (max |reverse cumsum| + 1e-6)`` (``prime_dp_rm.py`` ``prime_norm``)."""

PRIME_GRANULARITIES = ("token", "whole")
"""``prime_granularity``: a reward on every response token, or their sum on the last one (as an ORM's)."""
PRIME_NORMS = ("batch_norm", "none")
"""``prime_norm``: divide by the batch's largest absolute return of the process rewards, or leave them."""
PRIME_LOSSES = ("ce", "dpo", "bon_acc", "bon_rm")
"""The implicit PRM's update losses (verl recipe ``reward_model.model.loss_type``; PRIME's default ``ce``)."""


# ---- the implicit PRM -----------------------------------------------------------------------------------


def implicit_token_rewards(
    rm_logprobs: Tensor, ref_logprobs: Tensor, response_mask: Tensor, beta: float = PRIME_BETA
) -> Tensor:
    """The implicit process reward of each response token, ``(B, T)``:
    ``r_t = beta * (log pi_phi(y_t | y_<t) - log pi_ref(y_t | y_<t))``, 0 outside ``response_mask``.

    PRIME's ``q = rm_log_labels - ref_log_labels`` ("actually diff of q"), trimmed to 0 after each response,
    then ``r = q * beta`` (``prime_dp_rm.py`` ``_forward_micro_batch``, ``lambda = 0``). ``beta`` is applied
    here once: :func:`implicit_outcome_logits` and :func:`implicit_prm_loss` take these rewards as they are.
    The gradient flows through ``rm_logprobs`` (and ``ref_logprobs`` unless the caller detaches it).
    """
    diff = rm_logprobs - ref_logprobs
    # torch.where, not a product: a padding position's log-prob may be -inf or NaN.
    return torch.where(response_mask.bool(), diff * beta, torch.zeros_like(diff))


def implicit_outcome_logits(token_rewards: Tensor, response_mask: Tensor) -> Tensor:
    """The implicit PRM's sequence-level reward ``r_phi(y) = sum_t r_t`` (``(B,)``): the logit of its
    probability that the response is correct, ``sigmoid(r_phi(y))`` (PRIME's ``(q * mask).sum(1) * beta``)."""
    return masked_sum(token_rewards, response_mask, dim=-1)


def implicit_prm_loss(
    token_rewards: Tensor,
    response_mask: Tensor,
    labels: Tensor,
    loss_type: str = "ce",
    *,
    group_index: Tensor | int | None = None,
    reference_logits: Tensor | None = None,
    global_num_seqs: int | None = None,
) -> Tensor:
    """PRIME's update loss of the implicit PRM from outcome labels ``labels`` (``(B,)``, 0/1 or in [0, 1]).

    With ``s_i = sum_t r_{i,t}`` (:func:`implicit_outcome_logits`; beta is already in the rewards):

    * ``ce`` (PRIME's default, ``compute_ce_dpo_loss_rm``): ``BCE(sigmoid(s_i), label_i)``, the mean over the
      batch. Computed with logits (PRIME: ``binary_cross_entropy(sigmoid(.))``; the same value wherever
      ``sigmoid`` does not round to 0 or 1, where PRIME's clamps the log at -100).
    * ``dpo`` (``compute_detach_dpo_loss_rm``, ``bon_mode="none"``): ``-log sigmoid(sign_i (s_i - o_i))``,
      the mean, with ``sign_i = +1`` for a correct sample (label > 0), -1 otherwise, and ``o_i`` the mean
      ``reference_logits`` of the samples of its group with a lower label (a correct sample) or a higher one
      (a wrong sample), 0 when there are none.
    * ``bon_acc`` / ``bon_rm``: the ``dpo`` terms weighted by ``n * p_i^(n - 1)`` (the probability that the
      sample is its group's best of ``n``, ``p_i`` the fraction of its group with a label ``<=`` its own,
      resp. a reference logit ``<= s_i``) and **summed** over the batch, as PRIME does.

    ``group_index`` (``dpo`` and ``bon_*``): the group size of contiguous groups or ``(B,)`` group ids.
    ``reference_logits`` (``(B,)``): the sequence rewards before this update (PRIME's ``Q_bc * beta``, the
    recipe's ``update: reverse``), detached; ``None``: the current ones, detached. ``global_num_seqs``
    (``ce``, ``dpo``): divide the sum by the sample count of the whole optimisation step instead of this
    micro-batch's (gradient accumulation; PRIME divides each micro-batch's mean by the number of micro-batches).
    """
    if loss_type not in PRIME_LOSSES:
        raise ValueError(f"unknown implicit PRM loss {loss_type!r} (known: {', '.join(PRIME_LOSSES)})")
    logits = implicit_outcome_logits(token_rewards, response_mask)
    labels = labels.to(logits.dtype)
    if loss_type == "ce":
        losses = F.binary_cross_entropy_with_logits(logits, labels, reduction="none")
        return losses.sum() / (global_num_seqs or losses.numel())
    if group_index is None:
        raise ValueError(f"the {loss_type} loss compares each sample with its group: pass group_index")
    rows = _group_ids(group_index, logits.shape[0], logits.device)
    ref = logits.detach() if reference_logits is None else reference_logits.to(logits.dtype)
    same = rows[:, None] == rows[None, :]
    correct = labels > 0
    # The samples each one is compared with: its group's worse ones if it is correct, better ones if wrong.
    other = torch.where(
        correct[:, None], labels[None, :] < labels[:, None], labels[None, :] > labels[:, None]
    )
    chosen = same & other
    count = chosen.sum(dim=1)
    other_logit = (chosen.to(ref.dtype) * ref[None, :]).sum(dim=1) / count.clamp(min=1)
    other_logit = torch.where(count > 0, other_logit, torch.zeros_like(other_logit))
    sign = correct.to(logits.dtype) * 2 - 1
    losses = -F.logsigmoid((logits - other_logit) * sign)
    if loss_type == "dpo":
        return losses.sum() / (global_num_seqs or losses.numel())
    if global_num_seqs is not None:
        raise ValueError(
            f"the {loss_type} loss is a weighted sum (as PRIME's): global_num_seqs does not apply"
        )
    n = same.sum(dim=1).to(logits.dtype)
    if loss_type == "bon_acc":
        at_most = labels[None, :] <= labels[:, None]
    else:
        at_most = ref[None, :] <= logits.detach()[:, None]
    frac = (same & at_most).sum(dim=1).to(logits.dtype) / n
    weight = n * frac.pow(n - 1)
    return (losses * weight).sum()


# ---- process rewards for the policy -----------------------------------------------------------------------


def prime_token_rewards(
    token_rewards: Tensor,
    response_mask: Tensor,
    *,
    granularity: str = "token",
    norm: str = "batch_norm",
    drop_last_token: bool = False,
    eps: float = PRIME_NORM_EPS,
) -> Tensor:
    """The process rewards the policy sees (PRIME's ``rm_scores``), ``(B, T)``, from the implicit token
    rewards (:func:`implicit_token_rewards`).

    ``granularity`` (``reward_model.prime_granularity``): ``token`` keeps ``r_t`` on every response token;
    ``whole`` puts ``sum_t r_t`` on the last one (PRIME-RL/PRIME ``dp_prime.py`` ``compute_implicit_reward``;
    verl's recipe assigns the whole vector to one position there, which raises, verl issue #1322).
    ``drop_last_token`` (``token`` only): 0 on the last response token, as verl's recipe writes
    ``token_level_score[i, : max_positions[i] - 1]`` (PRIME-RL/PRIME and the paper keep it).

    ``norm`` (``reward_model.prime_norm``): ``batch_norm`` divides every reward by
    ``max_{i,t} |sum_{s >= t} r_{i,s}| + eps`` over the whole batch given (the largest return the process
    rewards alone could give, so that their returns stay within [-1, 1]; PRIME normalises each data-parallel
    rank's batch); ``none`` leaves them (the scale is then beta's).
    """
    if granularity not in PRIME_GRANULARITIES:
        raise ValueError(f"unknown granularity {granularity!r} (known: {', '.join(PRIME_GRANULARITIES)})")
    if norm not in PRIME_NORMS:
        raise ValueError(f"unknown prime norm {norm!r} (known: {', '.join(PRIME_NORMS)})")
    mask = response_mask.bool()
    scores = torch.where(mask, token_rewards, torch.zeros_like(token_rewards))
    last = _last_token(mask)
    if granularity == "whole":
        if drop_last_token:
            raise ValueError(
                "drop_last_token is verl's recipe's token granularity; whole sums onto that token"
            )
        scores = last.to(scores.dtype) * scores.sum(dim=-1, keepdim=True)
    elif drop_last_token:
        scores = torch.where(last, torch.zeros_like(scores), scores)
    if norm == "batch_norm":
        reverse_cumsum = torch.flip(torch.cumsum(torch.flip(scores, [-1]), -1), [-1])
        scores = scores / (reverse_cumsum.abs().max() + eps)
    return scores


# ---- the advantage --------------------------------------------------------------------------------------


def prime_advantages(
    token_rewards: Tensor,
    outcome_rewards: Tensor,
    response_mask: Tensor,
    group_index: Tensor | int,
    *,
    rm_coef: float = PRIME_RM_COEF,
    outcome_coef: float = PRIME_OUTCOME_COEF,
    rm_gamma: float = 1.0,
    outcome_gamma: float = 1.0,
    valid: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """PRIME's advantage as its code computes it; returns ``(advantages, returns)``, both ``(B, T)``.

    ``token_rewards`` are the process rewards (:func:`prime_token_rewards`), ``outcome_rewards`` the
    verifier's ``(B,)`` (or ``(B, T)``, summed over the mask). ``group_index``: the group size ``n`` of
    contiguous groups (PRIME's layout, ``n >= 2``) or ``(B,)`` group ids. For each source, RLOO inside each
    group of ``n`` (``masked_rloo`` in verl's ``prime_core_algos.py``; PRIME-RL/PRIME ``compute_rloo_returns``)::

        x'_{i,t} = x_{i,t} * n / (n - 1) - (sum_{j in g} mean_t x_{j,t}) / (n - 1)

    on the source's tokens: every response token for the process rewards, the last one for the outcome, where
    it is ``o_i - mean_{j != i} o_j``. For the process rewards this is the paper's
    ``r_{i,t} - mean_{j != i} r_phi(y^j) / |y^j|`` plus ``(r_{i,t} - mean_t r_{i,t}) / (n - 1)``: the code
    scales the token's own reward by ``n / (n - 1)`` where the paper's formula leaves it; we follow the code.
    Then ``returns = G(rm_coef * r') + G(outcome_coef * o')`` with ``G`` the reward-to-go (discount
    ``rm_gamma`` / ``outcome_gamma``, PRIME-RL/PRIME's ``reward_model_gamma`` / ``verifier_gamma``; both 1 in
    ``run_prime_main.sh`` and in verl's recipe, which sums before one reverse cumsum), and the advantages are
    ``masked_whiten(returns)`` over every response token of the batch (mean, unbiased variance, ``1e-8``).

    Defaults: ``rm_coef = outcome_coef = 5`` (verl recipe ``reward_dpo_coef`` / ``reward_gt_coef``;
    PRIME-RL/PRIME ``rm_coef`` / ``verifier.reward_coef``; PRIME-RL/PRIME leaves both out of its advantage,
    the same after whitening when they are equal), ``gamma = 1``. ``valid`` False: left out of its group's
    baseline and of the whitening, advantage 0; so is a sample with no response token in the mask. A group
    with fewer than two such samples has no baseline: its RLOO terms are 0 (PRIME would divide by 0).
    """
    mask = response_mask.bool()
    batch = mask.shape[0]
    rows = _group_ids(group_index, batch, mask.device)
    member = mask.any(dim=-1)
    if valid is not None:
        member = member & valid.bool()
    outcome = (
        _sequence_scores(outcome_rewards, response_mask) if outcome_rewards.dim() == 2 else outcome_rewards
    )
    process = torch.where(mask, token_rewards, torch.zeros_like(token_rewards))
    per_sample_mean = process.sum(dim=-1) / mask.sum(dim=-1).clamp(min=1)
    process_rloo = _rloo(process, mask, per_sample_mean, rows, member)
    last = _last_token(mask)
    outcome_tokens = last.to(process.dtype) * outcome.to(process.dtype)[:, None]
    outcome_rloo = _rloo(outcome_tokens, last, outcome.to(process.dtype), rows, member)
    loss_mask = mask & member[:, None]
    returns = discounted_returns(rm_coef * process_rloo, loss_mask, rm_gamma) + discounted_returns(
        outcome_coef * outcome_rloo, loss_mask, outcome_gamma
    )
    return masked_whiten(returns, loss_mask), returns


@advantage_estimator("prime", centres_by_group=True, needs_process_rewards=True)
def prime_advantage_estimator(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    *,
    group_size: int,
    process_rewards: Tensor | None = None,
    valid: Tensor | None = None,
    gamma: float = 1.0,
    rm_coef: float = PRIME_RM_COEF,
    outcome_coef: float = PRIME_OUTCOME_COEF,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """PRIME (Cui et al., 2025): :func:`prime_advantages` of the implicit PRM's process rewards
    (``process_rewards``, ``(B, T)``, already through :func:`prime_token_rewards`) and the outcome (the sum of
    ``token_level_rewards``: the verifier's reward on the last token), with one discount ``gamma`` for both
    (PRIME's two default to ``algorithm.gamma``). Without process rewards it refuses to run."""
    if process_rewards is None:
        raise ValueError(
            "the prime advantage estimator needs token-level process rewards from an implicit PRM "
            "(set reward.process: implicit_prm:PATH)"
        )
    outcome = _sequence_scores(token_level_rewards, response_mask)
    return prime_advantages(
        process_rewards,
        outcome,
        response_mask,
        group_size,
        rm_coef=rm_coef,
        outcome_coef=outcome_coef,
        rm_gamma=gamma,
        outcome_gamma=gamma,
        valid=valid,
    )


# ---- helpers ---------------------------------------------------------------------------------------------


def _group_ids(group_index: Tensor | int, batch: int, device: torch.device) -> Tensor:
    """Each sample's group as ``0 .. G-1`` on ``device``: contiguous groups of a size (PRIME's layout), or
    from ids."""
    if isinstance(group_index, int):
        if group_index < 2:
            raise ValueError(f"PRIME's leave-one-out baseline needs groups of at least 2, got {group_index}")
        if batch % group_index:
            raise ValueError(f"batch of {batch} is not a whole number of groups of {group_index}")
        return torch.arange(batch, device=device) // group_index
    return _group_rows(group_index, batch)[0].to(device)


def _last_token(mask: Tensor) -> Tensor:
    """``(B, T)`` bool: the last position of each row's mask (none for an empty row)."""
    positions = torch.arange(mask.shape[-1], device=mask.device).expand_as(mask)
    last = torch.where(mask, positions, torch.full_like(positions, -1)).amax(dim=-1, keepdim=True)
    return mask & (positions == last)


def _rloo(values: Tensor, support: Tensor, sample_means: Tensor, rows: Tensor, member: Tensor) -> Tensor:
    """PRIME's ``masked_rloo``: ``x * n / (n - 1) - sum_{j in g} m_j / (n - 1)`` on the ``support`` tokens of
    the members, 0 elsewhere; ``n`` is the group's member count, ``m_j`` a member's mean of ``x`` over its
    support. A group of fewer than two members has no baseline: 0."""
    weights = member.to(values.dtype)
    groups = int(rows.max().item()) + 1 if rows.numel() else 0
    n = torch.zeros(groups, dtype=values.dtype, device=values.device).index_add_(0, rows, weights)[rows]
    total = torch.zeros(groups, dtype=values.dtype, device=values.device).index_add_(
        0, rows, sample_means * weights
    )[rows]
    has_baseline = member & (n > 1)
    denom = (n - 1).clamp(min=1)[:, None]
    out = values * (n[:, None] / denom) - total[:, None] / denom
    return torch.where(support & has_baseline[:, None], out, torch.zeros_like(out))


__all__ = [
    "PRIME_BETA",
    "PRIME_GRANULARITIES",
    "PRIME_LOSSES",
    "PRIME_NORMS",
    "PRIME_OUTCOME_COEF",
    "PRIME_RM_COEF",
    "implicit_outcome_logits",
    "implicit_prm_loss",
    "implicit_token_rewards",
    "prime_advantage_estimator",
    "prime_advantages",
    "prime_token_rewards",
]
