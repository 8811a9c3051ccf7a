"""PRIME's released code, transcribed as the reference for tests/test_prime_formulas.py.

This is a transcription for tests, not part of the package: the arithmetic of the authors' functions with
their names, loops and order of operations. Ray, FSDP, the models' forward passes, ``DataProto`` (here a
plain ``.batch`` dict) and the logging are left out. Each block names its repo, commit, file and lines.

* **PRIME-RL/PRIME** (the paper's code) at 18ad596f08d487bb546d80d738d99ec697bd2e75 (2025-03-18), under
  ``training/verl/``.
* **verl's PRIME recipe** (the PRIME team's port): volcengine/verl at
  246cac4ca6b0e3ce1009bc48aaa798689e0600af (2026-01-06, the last commit before ``recipe/`` moved to the
  verl-recipe repo), under ``recipe/prime/``; its formulas are those of f0e7f9fcbe0126f29efad689690ef570bf8e9a7a
  (2025-03-10, "recipe: PRIME algorithm (#362)"), later commits renamed ``eos_mask`` and reformatted.

The only edits: tensors that the authors create as float32 are created in the inputs' dtype (float64 in the
tests) so that the comparison can be tight; ``config`` is a ``SimpleNamespace`` with the fields read. The
tests also set torch's default dtype to float64: ``masked_var``'s ``mask_sum / (mask_sum - 1)`` divides two
integer tensors, which gives the default dtype (float32 in the authors' runs).
"""

from __future__ import annotations

import torch

# ============================================================================ verl_F (the masked statistics)
# PRIME-RL/PRIME training/verl/utils/torch_functional.py, masked_mean / masked_var / masked_whiten, L107-136.


def prime_masked_mean(values, mask, axis=None):
    """Compute mean of tensor with a masked values."""
    return (values * mask).sum(axis=axis) / mask.sum(axis=axis)


def prime_masked_var(values, mask, unbiased=True):
    """Compute variance of tensor with masked values."""
    mean = prime_masked_mean(values, mask)
    centered_values = values - mean
    variance = prime_masked_mean(centered_values**2, mask)
    if unbiased:
        mask_sum = mask.sum()
        if mask_sum == 0:
            raise ValueError("At least one element in the mask has to be 1.")
        if mask_sum == 1:
            raise ValueError("The sum of the mask is one, which can cause a division by zero.")
        bessel_correction = mask_sum / (mask_sum - 1)
        variance = variance * bessel_correction
    return variance


def prime_masked_whiten(values, mask, shift_mean=True):
    """Whiten values with masked values."""
    mean, var = prime_masked_mean(values, mask), prime_masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened += mean
    return whitened


# volcengine/verl verl/utils/torch_functional.py at 246cac4, masked_sum L266-284, masked_mean L287-301,
# masked_var L304-319, masked_whiten L322-339 (the recipe's; masked_mean adds 1e-8 to the count).


def verl_masked_sum(values, mask, axis=None):
    valid_values = torch.where(mask.bool(), values, 0.0)
    return (valid_values * mask).sum(axis=axis)


def verl_masked_mean(values, mask, axis=None):
    s = verl_masked_sum(values, mask, axis)
    return s / (mask.sum(axis=axis) + 1e-8)


def verl_masked_var(values, mask, unbiased=True):
    mean = verl_masked_mean(values, mask)
    centered_values = values - mean
    variance = verl_masked_mean(centered_values**2, mask)
    if unbiased:
        mask_sum = mask.sum()
        if mask_sum == 0:
            raise ValueError("At least one element in the mask has to be 1.")
        if mask_sum == 1:
            raise ValueError("The sum of the mask is one, which can cause a division by zero.")
        bessel_correction = mask_sum / (mask_sum - 1)
        variance = variance * bessel_correction
    return variance


def verl_masked_whiten(values, mask, shift_mean=True):
    mean, var = verl_masked_mean(values, mask), verl_masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened += mean
    return whitened


class Data:
    """Stands in for ``verl.DataProto``: the code reads ``data.batch[key]`` and ``data.batch.keys()``."""

    def __init__(self, **batch):
        self.batch = dict(batch)


# ============================================================================ verl recipe: the advantage
# recipe/prime/prime_core_algos.py, compute_rloo_advantage_return, L21-79. ``response_mask`` is the response
# part of the attention mask (prime_ray_trainer.py compute_advantage, L43-56); ``n_samples`` is rollout.n.


def compute_rloo_advantage_return(data, response_mask, n_samples, config):
    # calculate rloo reward on different reward sources, and sum again
    def masked_rloo(reward_tensor_original, mask_tensor):
        reward_tensor = reward_tensor_original.clone()
        reward_tensor[~mask_tensor] = 0
        for start_pos in range(0, reward_tensor.shape[0], n_samples):
            cur_rewards_mean = torch.cat(
                [
                    reward_tensor[pos : pos + 1][mask_tensor[pos : pos + 1]].mean(dim=0, keepdim=True)
                    for pos in range(start_pos, start_pos + n_samples)
                ],
                dim=0,
            )
            cur_rewards_sum = cur_rewards_mean.sum()
            cur_reward_baseline = cur_rewards_sum / (n_samples - 1)
            reward_tensor[start_pos : start_pos + n_samples][
                mask_tensor[start_pos : start_pos + n_samples]
            ] = (
                reward_tensor[start_pos : start_pos + n_samples][
                    mask_tensor[start_pos : start_pos + n_samples]
                ]
                * (n_samples / (n_samples - 1))
                - cur_reward_baseline
            )

        return reward_tensor

    reward_tensors = []

    with torch.no_grad():
        if "rm_scores" in data.batch.keys() and config.algorithm.reward_dpo_coef != 0.0:  # noqa: SIM118
            reward_tensor = data.batch["rm_scores"]
            reward_mask = response_mask.bool()

            reward_tensors.append(masked_rloo(reward_tensor, reward_mask) * config.algorithm.reward_dpo_coef)

        if "acc" in data.batch.keys() and config.algorithm.reward_gt_coef != 0.0:  # noqa: SIM118
            # float32 in the recipe
            reward_tensor = torch.zeros_like(response_mask, dtype=data.batch["acc"].dtype)
            reward_mask = torch.zeros_like(response_mask, dtype=torch.bool)

            prompt_ids = data.batch["prompts"]
            prompt_length = prompt_ids.shape[-1]
            valid_response_length = data.batch["attention_mask"][:, prompt_length:].sum(-1)

            reward_mask[
                torch.arange(
                    0, valid_response_length.shape[0], dtype=torch.long, device=valid_response_length.device
                ),
                valid_response_length - 1,
            ] = True
            reward_tensor[
                torch.arange(
                    0, valid_response_length.shape[0], dtype=torch.long, device=valid_response_length.device
                ),
                valid_response_length - 1,
            ] = data.batch["acc"]

            reward_tensors.append(masked_rloo(reward_tensor, reward_mask) * config.algorithm.reward_gt_coef)

        final_reward_tensor = sum(reward_tensors)

        returns = (final_reward_tensor * response_mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])

        advantages = returns.clone()
        advantages = verl_masked_whiten(advantages, response_mask)

        return advantages, returns


# ============================================================================ verl recipe: the PRM's losses
# recipe/prime/prime_core_algos.py, compute_ce_dpo_loss_rm L82-85, compute_detach_dpo_loss_rm L88-116.
# ``token_level_scores`` is the raw ``q`` (no beta): prime_dp_rm.py update_rm passes ``q``, L334-367.


def compute_ce_dpo_loss_rm(token_level_scores, acc, response_mask, beta):
    cur_scores = ((token_level_scores * response_mask).sum(dim=1) * beta).sigmoid()
    cur_dpo_loss = torch.nn.functional.binary_cross_entropy(cur_scores, acc)
    return cur_dpo_loss


def compute_detach_dpo_loss_rm(token_level_scores, acc, Q_bc, acc_bc, response_mask, beta, bon_mode="none"):
    # we always assume that the BoN size equals n_samples
    # mode1: use acc as rm
    # mode2: use Q as rm
    cur_Q = (token_level_scores * response_mask).sum(dim=1) * beta
    other_Q = torch.zeros_like(cur_Q)
    for i in range(token_level_scores.shape[0]):
        Q_chosen = Q_bc[i][acc_bc[i] < acc[i]] if acc[i] > 0 else Q_bc[i][acc_bc[i] > acc[i]]
        if len(Q_chosen) > 0:
            other_Q[i] = Q_chosen.mean() * beta
        else:
            other_Q[i] = 0
    dpo_loss = -torch.log(torch.sigmoid((cur_Q - other_Q) * ((acc > 0).float() * 2 - 1)))
    if bon_mode == "none":
        dpo_loss = dpo_loss.mean()
    else:
        weight = torch.zeros_like(dpo_loss)
        n_samples = acc_bc.shape[1]
        if bon_mode == "bon_rm":
            for i in range(token_level_scores.shape[0]):
                # .float() in the recipe
                weight[i] = n_samples * torch.pow(
                    (Q_bc[i] * beta <= cur_Q[i]).to(cur_Q.dtype).mean(), n_samples - 1
                )
        elif bon_mode == "bon_acc":
            for i in range(token_level_scores.shape[0]):
                # .float() in the recipe
                weight[i] = n_samples * torch.pow((acc_bc[i] <= acc[i]).to(cur_Q.dtype).mean(), n_samples - 1)
        else:
            raise NotImplementedError
        dpo_loss = (dpo_loss * weight).sum()

    return dpo_loss


# recipe/prime/prime_ray_trainer.py, compute_reward, update_style == "reverse", L349-365: each sample's row of
# its group's sequence sums of q (``Q_bc``) and labels (``acc_bc``).


def broadcast_group(q, acc, n_samples):
    return {
        "Q_bc": q.sum(dim=-1)
        .view(-1, n_samples)
        .unsqueeze(1)
        .expand(-1, n_samples, -1)
        .reshape(-1, n_samples),
        "acc_bc": acc.view(-1, n_samples).unsqueeze(1).expand(-1, n_samples, -1).reshape(-1, n_samples),
    }


# ============================================================================ verl recipe: the process rewards
# recipe/prime/prime_dp_rm.py, DataParallelPRIMERewardModel._forward_micro_batch after the forward passes,
# L184-228 (``lambda`` = 0, its default: the ``lam != 0`` branch, L199-215, is left out), and prime_norm,
# L242-246. ``rm_log_labels`` / ``ref_log_labels`` are the response tokens' log-probs, (B, T).


def recipe_implicit_reward(micro_batch, rm_log_labels, ref_log_labels, prompt_length, config):
    num_actions = micro_batch["input_ids"].shape[-1] - prompt_length
    max_positions = micro_batch["attention_mask"][:, prompt_length:].sum(-1)

    ref_log_labels.to(rm_log_labels.dtype)
    q = rm_log_labels[:, -num_actions:] - ref_log_labels[:, -num_actions:]  # this is actually diff of q

    # trim unnecessary logprobs here
    for i in range(micro_batch["input_ids"].shape[0]):
        q[i, max_positions[i] :] = 0

    # reward computation does not need gradient. only q needs
    with torch.no_grad():
        beta = config.model.get("beta_train", 0.05)
        r = q * beta

        token_level_score = torch.zeros_like(q)

        if config.prime_granularity == "token":
            for i in range(micro_batch["input_ids"].shape[0]):
                token_level_score[i, : max_positions[i] - 1] = r[i, : max_positions[i] - 1]
        elif config.prime_granularity == "whole":
            for i in range(micro_batch["input_ids"].shape[0]):
                token_level_score[i, max_positions[i] - 1] = r[i, : max_positions[i]]
        else:
            raise NotImplementedError

    return token_level_score, q


def recipe_prime_norm(token_level_scores, config):
    if config.prime_norm == "batch_norm":
        reverse_cumsum = torch.cumsum(token_level_scores.flip(dims=[1]), dim=-1).flip(dims=[1])
        token_level_scores = token_level_scores / (reverse_cumsum.abs().max() + 1e-6)
    return token_level_scores


# ============================================================================ PRIME-RL/PRIME: process rewards
# training/verl/workers/actor/dp_prime.py, DataParallelPRIME.compute_implicit_reward, L116-143, and the
# batch_norm of update_policy, L239-241. ``log_probs`` / ``ref_log_probs`` are the response tokens', (B, T).
# No beta here: PRIME-RL/PRIME's rm scores are the raw log-ratio (beta is only in the loss, L183).


def compute_implicit_reward(micro_batch, log_probs, ref_log_probs, config):
    response_length = micro_batch["responses"].shape[-1]
    max_positions = micro_batch["attention_mask"][:, -response_length:].sum(-1)

    ref_log_probs.to(log_probs.dtype)
    q = log_probs[:, -response_length:] - ref_log_probs[:, -response_length:]  # this is actually diff of q

    # reward computation does not need gradient. only q needs
    with torch.no_grad():
        step_ends = []
        if config.prime_granularity == "token":
            for i in range(micro_batch["input_ids"].shape[0]):
                step_ends.append(list(range(max_positions[i])))
        elif config.prime_granularity == "whole":
            for i in range(micro_batch["input_ids"].shape[0]):
                step_ends.append([max_positions[i] - 1])
        else:
            raise NotImplementedError

        # float32 in PRIME-RL/PRIME
        token_level_score = torch.zeros_like(micro_batch["input_ids"][:, -response_length:]).to(q.dtype)
        # the strategy of translating q to reward function:
        for i, step_end in enumerate(step_ends):
            for j in range(len(step_end)):
                step_range = [
                    min(step_end[j - 1] + 1, response_length - 1) if j > 0 else 0,
                    min(response_length - 1, step_end[j]),
                ]
                token_level_score[i, step_range[1]] = q[i, step_range[0] : step_range[1] + 1].sum()

    return token_level_score, q


def prime_batch_norm(token_level_scores, config):
    if config.prime_norm == "batch_norm":
        reverse_cumsum = torch.cumsum(token_level_scores.flip(dims=[1]), dim=-1).flip(dims=[1])
        token_level_scores = token_level_scores / (reverse_cumsum.abs().max() + 1e-6)
    return token_level_scores


# ============================================================================ PRIME-RL/PRIME: the advantage
# training/verl/trainer/main_ppo.py, RewardManager.__call__, L79-96: the verifier's score on the last token
# (``gt_scores``; the coefficients only enter ``token_level_scores['all']``, which the rloo estimator does not
# read).


def gt_scores(data, verifier_score):
    verifier_reward = torch.zeros_like(
        data.batch["responses"], dtype=verifier_score.dtype
    )  # float32 in PRIME
    prompt_ids = data.batch["prompts"]
    prompt_length = prompt_ids.shape[-1]
    valid_response_length = data.batch["attention_mask"][:, prompt_length:].sum(-1)
    for i in range(verifier_reward.shape[0]):
        verifier_reward[i, valid_response_length[i] - 1] += verifier_score[i]
    return verifier_reward


# training/verl/trainer/ppo/core_algos.py, compute_rloo_returns, L108-153 (ray_trainer.py compute_advantage,
# L135-142: ``eos_mask`` is the response part of the attention mask, ``n_samples`` is data.n_samples).


def compute_rloo_returns(data, eos_mask, n_samples, config):
    # calculate rloo reward on different reward sources, and sum again
    with torch.no_grad():
        discount_rewards = []
        for k, v in data.batch.items():
            if k == "rm_scores":
                gamma = config.algorithm.adv_params.reward_model_gamma
                reward_mask = eos_mask.bool()
            elif k == "gt_scores":
                gamma = config.algorithm.adv_params.verifier_gamma
                prompt_ids = data.batch["prompts"]
                prompt_length = prompt_ids.shape[-1]
                valid_response_length = data.batch["attention_mask"][:, prompt_length:].sum(-1)
                reward_mask = torch.zeros_like(v, dtype=torch.bool)
                reward_mask[
                    torch.arange(
                        0,
                        valid_response_length.shape[0],
                        dtype=torch.long,
                        device=valid_response_length.device,
                    ),
                    valid_response_length - 1,
                ] = True
            else:  # not a reward tensor
                continue
            reward_tensor = v.clone()
            reward_tensor[~reward_mask] = 0
            for start_pos in range(0, reward_tensor.shape[0], n_samples):
                cur_rewards_mean = torch.cat(
                    [
                        reward_tensor[pos : pos + 1][reward_mask[pos : pos + 1]].mean(dim=0, keepdim=True)
                        for pos in range(start_pos, start_pos + n_samples)
                    ],
                    dim=0,
                )
                cur_rewards_sum = cur_rewards_mean.sum()
                cur_reward_baseline = cur_rewards_sum / (n_samples - 1)
                reward_tensor[start_pos : start_pos + n_samples][
                    reward_mask[start_pos : start_pos + n_samples]
                ] = (
                    reward_tensor[start_pos : start_pos + n_samples][
                        reward_mask[start_pos : start_pos + n_samples]
                    ]
                    * (n_samples / (n_samples - 1))
                    - cur_reward_baseline
                )

            discount_reward = torch.zeros_like(reward_tensor)
            for step in reversed(range(reward_tensor.shape[1])):
                if step == reward_tensor.shape[1] - 1:
                    discount_reward[:, step] = reward_tensor[:, step]
                else:
                    discount_reward[:, step] = reward_tensor[:, step] + gamma * discount_reward[:, step + 1]
            discount_rewards.append(discount_reward)
        # return is the sum of discounted reward
        returns = sum(discount_rewards)
        # advantage is whitened return
        advantages = returns.clone()
        advantages = prime_masked_whiten(advantages, eos_mask)
    return advantages, returns


# training/verl/trainer/ppo/core_algos.py, compute_ce_dpo_loss_rm, L265-268 (the same as the recipe's).


def prime_compute_ce_dpo_loss_rm(token_level_scores, acc, eos_mask, beta):
    cur_scores = ((token_level_scores * eos_mask).sum(dim=1) * beta).sigmoid()
    cur_dpo_loss = torch.nn.functional.binary_cross_entropy(cur_scores, acc)
    return cur_dpo_loss
