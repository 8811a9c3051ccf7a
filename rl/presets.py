"""The RL algorithm presets: the fields where the papers differ (everything else is the dataclass default of
:mod:`rewardlab.rl.config`); their YAML copies live in ``rl/configs/``."""

from __future__ import annotations

from typing import Any

# Values where the papers differ; everything else is the dataclass default.
PRESETS: dict[str, dict[str, Any]] = {
    # DeepSeekMath (Shao et al., 2024): group-normalised advantages, per-sequence mean of token losses,
    # KL in the loss (k3) with beta 0.04, lr 1e-6, one update per rollout.
    "grpo": {
        "algorithm": {
            "adv_estimator": "grpo",
            "adv_scale": "group",
            "loss_agg_mode": "seq-mean-token-mean",
            "kl_coef": 0.04,
            "kl_estimator": "k3",
            "clip_ratio_low": 0.2,
            "clip_ratio_high": 0.2,
        },
        "train": {"learning_rate": 1e-6, "epochs": 1},
    },
    # Dr.GRPO (Liu et al., 2025): no std normalisation, constant normaliser, no KL.
    "dr_grpo": {
        "algorithm": {
            "adv_estimator": "dr_grpo",
            "adv_scale": "none",
            "loss_agg_mode": "seq-mean-token-sum-norm",
            "kl_coef": 0.0,
        },
        "train": {"learning_rate": 1e-6},
    },
    # DAPO (Yu et al., 2025): clip-higher 0.2/0.28, token-mean, no KL, dynamic sampling, overlong
    # filtering and soft punishment, G = 16.
    "dapo": {
        "algorithm": {
            "adv_estimator": "grpo",
            "loss_agg_mode": "token-mean",
            "clip_ratio_low": 0.2,
            "clip_ratio_high": 0.28,
            "kl_coef": 0.0,
            "dynamic_sampling": True,
        },
        "reward": {"truncation": "mask"},
        "rollout": {"n": 16},
        "train": {"learning_rate": 1e-6},
    },
    # RLOO (Ahmadian et al., 2024): leave-one-out baseline, the whole completion is one action (sequence sum),
    # KL in the reward (beta 0.05 as TRL's RLOOTrainer), k = 4.
    "rloo": {
        "algorithm": {
            "adv_estimator": "rloo",
            "loss_agg_mode": "seq-mean-token-sum",
            "kl_coef": 0.05,
            "kl_estimator": "k1",
            "use_kl_in_reward": True,
        },
        "rollout": {"n": 4},
        "train": {"learning_rate": 1e-6},
    },
    # REINFORCE++ (Hu et al., 2025): per-token KL in the reward (k1, beta 0.01 as OpenRLHF's init_kl_coef),
    # returns whitened over the whole batch (no per-prompt baseline), PPO clip 0.2, token-mean.
    "reinforce_pp": {
        "algorithm": {
            "adv_estimator": "reinforce_pp",
            "loss_agg_mode": "token-mean",
            "kl_coef": 0.01,
            "kl_estimator": "k1",
            "use_kl_in_reward": True,
            "gamma": 1.0,
        },
        "train": {"learning_rate": 5e-7},
    },
    # PPO for LLMs (Ouyang et al., 2022; verl defaults): GAE with gamma = lambda = 1, value clipping 0.2,
    # 4 epochs with minibatches, KL in the reward, actor lr 1e-6 and critic lr 1e-5.
    "ppo": {
        "algorithm": {
            "adv_estimator": "gae",
            "loss_agg_mode": "token-mean",
            "gamma": 1.0,
            "lam": 1.0,
            "kl_coef": 0.001,
            "kl_estimator": "k1",
            "use_kl_in_reward": True,
            "cliprange_value": 0.2,
            "vf_coef": 0.5,
        },
        "rollout": {"n": 1},
        "train": {"learning_rate": 1e-6, "value_lr": 1e-5, "epochs": 4, "minibatches": 4},
    },
    # Lite PPO (Liu et al., 2025, "Tricks or Traps? A Deep Dive into RL for LLM Reasoning", sec. 5): the
    # group's mean with the batch's std, token-level loss aggregation, vanilla PPO loss, no KL.
    "lite_ppo": {
        "algorithm": {
            "adv_estimator": "grpo",
            "adv_scale": "batch",
            "loss_agg_mode": "token-mean",
            "kl_coef": 0.0,
        },
        "train": {"learning_rate": 1e-6},
    },
    # W-REINFORCE (Zhu et al., 2025, "The Surprising Effectiveness of Negative Reinforcement in LLM
    # Reasoning"): REINFORCE on +1/-1 rewards, the positive samples' term weighted 0.1, no KL.
    "w_reinforce": {
        "algorithm": {
            "adv_estimator": "reinforce_signed",
            "positive_adv_weight": 0.1,
            "negative_adv_weight": 1.0,
            "loss_agg_mode": "seq-mean-token-mean",
            "kl_coef": 0.0,
        },
        "train": {"learning_rate": 1e-6},
    },
    # Pass@k Training (Chen et al., 2025): analytic pass@k advantages, k = 4, otherwise GRPO without KL.
    "passk": {
        "algorithm": {"adv_estimator": "passk", "passk_k": 4, "kl_coef": 0.0},
        "train": {"learning_rate": 1e-6},
    },
    # GDPO (Liu et al., 2026): each reward source normalised in its group, summed with its weight, then
    # normalised over the batch; for runs with several reward sources (e.g. correctness and format).
    "gdpo": {
        "algorithm": {"adv_estimator": "gdpo", "kl_coef": 0.0},
        "train": {"learning_rate": 1e-6},
    },
    # GRPO with process rewards (DeepSeekMath's process supervision, Shao et al., 2024, sec. 4.1.3, with Gao et
    # al. 2024's Clip+Delta shaping against step-reward hacking): shaped step rewards on the step-end tokens
    # plus the verifier's success reward, return-to-go advantages with a leave-one-out group baseline.
    # Set reward.process (e.g. prm:runs/prm).
    "grpo_prm": {
        "algorithm": {
            "adv_estimator": "step_return",
            "adv_scale": "none",
            "step_baseline": "rloo",
            "loss_agg_mode": "seq-mean-token-mean",
            "kl_coef": 0.0,
        },
        "reward": {"step_shaping": "clip+delta", "step_eta": 0.0},
        "train": {"learning_rate": 1e-6},
    },
    # PRIME (Cui et al., 2025; PRIME-RL/PRIME's run_prime_main.sh): an implicit PRM started from the policy
    # (reference: the same frozen weights) and updated online from each step's outcomes (beta 0.05, lr 1e-6,
    # grad clip 10, four PRM steps per rollout batch), token-level process rewards normalised by the batch's
    # largest return; RLOO on process and outcome rewards (coefficients 5 and 5), whitened; 4 samples per
    # prompt with groups whose outcomes all agree dropped (its accuracy filter 0.2-0.8 at n = 4); actor lr
    # 5e-7, no KL, no entropy bonus, token-mean loss.
    "prime": {
        "algorithm": {
            "adv_estimator": "prime",
            "prime_rm_coef": 5.0,
            "prime_outcome_coef": 5.0,
            "loss_agg_mode": "token-mean",
            "kl_coef": 0.0,
            "dynamic_sampling": True,
        },
        "reward": {
            "process": "implicit_prm",
            "implicit_prm_beta": 0.05,
            "implicit_prm_update": True,
            "implicit_prm_lr": 1e-6,
            "implicit_prm_grad_clip": 10.0,
            "implicit_prm_minibatches": 4,
            "implicit_prm_granularity": "token",
            "implicit_prm_norm": "batch_norm",
        },
        "rollout": {"n": 4},
        "train": {"learning_rate": 5e-7},
    },
}
