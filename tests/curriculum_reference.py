"""The curriculum authors' update rules, transcribed as the reference for tests/test_curriculum_formulas.py.

This is a transcription for tests, not part of the package: only the update arithmetic of each method's
published code, in numpy, with the authors' names and order of operations; Ray, DataProto, torch, the
loaders' iteration and the logging are left out. Each block names its repo, commit, file, function and lines.

* AdaRFT: github.com/uscnlp-lime/verl at bf2dd7e675b4dca3c0de972544ddd9e7929c8dd9.
* DUMP: github.com/ZhentingWang/DUMP at 235e85d46141367c307a47bad085f7417aa41f85.
* SEC: the authors' code as vendored in github.com/Vincent-La/cofa (``sec/``) at
  8b685cbb5ad651a4015df8653ea28fb4ec2c2bbb.
* GHPO: github.com/hkgc-1/GHPO at af0a7dd859eafca17531bd7b01c76ccb3e36e0c0.

The authors compute in torch float32; this runs in numpy float64 so that the comparison can be tight (1e-9
relative). A ``token_level_rewards`` / ``advantages`` row is ``[B, T]`` with a ``response_mask`` as verl's.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

# ------------------------------------------------------------------------------------------------ verl GRPO
# DUMP verl/trainer/ppo/core_algos.py, compute_grpo_outcome_advantage, L111-154 (cofa's
# sec/verl/verl/trainer/ppo/core_algos.py L111-159 is the same with normalize=True; its
# ``(token_level_rewards * non_zero_mask).sum`` is the same sum). torch.std is the unbiased std (ddof=1).


def compute_grpo_outcome_advantage(token_level_rewards, eos_mask, index, epsilon=1e-6):
    response_length = token_level_rewards.shape[-1]
    scores = token_level_rewards.sum(axis=-1).astype(np.float64)

    id2score = defaultdict(list)
    id2mean = {}
    id2std = {}

    bsz = scores.shape[0]
    for i in range(bsz):
        id2score[index[i]].append(scores[i])
    for idx in id2score:
        if len(id2score[idx]) == 1:
            id2mean[idx] = 0.0
            id2std[idx] = 1.0
        elif len(id2score[idx]) > 1:
            id2mean[idx] = np.mean(np.array(id2score[idx]))
            id2std[idx] = np.std(np.array([id2score[idx]]), ddof=1)
        else:
            raise ValueError(f"no score in prompt index: {idx}")
    for i in range(bsz):
        scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
    scores = np.tile(scores[:, None], [1, response_length]) * eos_mask
    return scores, scores


# cofa sec/verl/verl/utils/torch_functional.py, masked_mean, L107-109
def masked_mean(values, mask, axis=None):
    return (values * mask).sum(axis=axis) / mask.sum(axis=axis)


# ------------------------------------------------------------------------------------------------ AdaRFT
# uscnlp-lime/verl verl/trainer/ppo/custom_sampler.py, class CurriculumSampler, L5-46 (``__init__`` L6-12,
# ``_select_closest_to_target`` L24-39, ``update_target_difficulty`` L41-43); the dataset is replaced by its
# difficulty column. Built with ``target_difficulty=0`` in ray_trainer.py L426-433.


class AdaRFTSampler:
    def __init__(self, difficulties, batch_size, target_difficulty=0):
        self.batch_size = batch_size
        self.target_difficulty = target_difficulty
        self.difficulties = np.array(difficulties)
        self.sorted_indices = np.argsort(self.difficulties)

    def _select_closest_to_target(self):
        diffs = np.abs(self.difficulties - self.target_difficulty)
        closest_indices = np.argsort(diffs)
        selected_indices = []
        for idx in closest_indices:
            if idx not in selected_indices:
                selected_indices.append(idx)
            if len(selected_indices) == self.batch_size:
                break
        return selected_indices

    def update_target_difficulty(self, new_target):
        self.target_difficulty = new_target


# uscnlp-lime/verl verl/trainer/ppo/ray_trainer.py, RayPPOTrainer.fit, L956-967 (after compute_advantage).
# ``token_level_rewards`` includes the KL penalty when use_kl_in_reward is on (L940-947).
def adarft_update(sampler, token_level_rewards, *, beta=0.5, alpha=2, eta=50, d_min=0, d_max=100):
    sequence_reward = token_level_rewards.sum(-1)
    current_reward = np.mean(sequence_reward)
    new_target_difficulty = sampler.target_difficulty + eta * np.tanh(alpha * (current_reward - beta))
    new_target_difficulty = np.clip(new_target_difficulty, d_min, d_max)
    sampler.update_target_difficulty(new_target_difficulty)
    return new_target_difficulty


# ------------------------------------------------------------------------------------------------ DUMP
# ZhentingWang/DUMP verl/utils/curriculum_learning.py, LearnabilityEstimator, L34-79 (``update``, L50-79;
# the Beta counts are kept although only logged).


@dataclass
class LearnabilityEstimator:
    alpha: float = 1.0
    beta: float = 1.0
    mu: float = 0.0
    n_samples: int = 0
    total_reward: float = 0.0
    window_size: int = 300
    recent_rewards: list = field(default_factory=list)
    recent_advantages: list = field(default_factory=list)

    def update(self, rewards, advantages):
        n = len(rewards)
        if n == 0:
            return
        self.recent_rewards.extend(rewards.tolist())
        self.recent_advantages.extend(advantages.tolist())
        if len(self.recent_rewards) > self.window_size:
            self.recent_rewards = self.recent_rewards[-self.window_size :]
            self.recent_advantages = self.recent_advantages[-self.window_size :]
        successes = np.sum(rewards >= 3)
        failures = len(rewards) - successes
        self.alpha += successes
        self.beta += failures
        window_advantages = np.abs(np.array(self.recent_advantages))  # abs after windowing
        self.mu = np.mean(window_advantages)
        self.n_samples += n
        self.total_reward += np.sum(rewards)


# CurriculumController, L97-211: ``compute_sampling_weights`` L137-197 (without the weight history, which
# feeds only a logged trend) and ``get_source_stats`` L199-211 (the two fields the weights read).
class CurriculumController:
    def __init__(self, data_sources, window_size=300):
        self.data_sources = list(set(data_sources))
        self.estimators = {
            source: LearnabilityEstimator(window_size=window_size) for source in self.data_sources
        }

    def compute_sampling_weights(self):
        stats = self.get_source_stats()
        base_scores = []
        source_to_index = {}
        total_samples = sum(stat["n_samples"] for stat in stats.values())
        total_samples = max(1, total_samples)
        for i, source in enumerate(self.data_sources):
            source_to_index[source] = i
            stat = stats[source]
            exploration_weight = 1.0
            ucb_score = stat["advantage_mean"]
            exploration_bonus = exploration_weight * np.sqrt(
                2 * np.log(total_samples + 1) / (stat["n_samples"] + 1)
            )
            ucb_score += exploration_bonus
            base_scores.append(ucb_score)
        temperature = 0.1
        scores_array = np.array(base_scores)
        if len(scores_array) > 0:
            max_score = np.max(scores_array)
            exp_scores = np.exp((scores_array - max_score) / temperature)
            weights_array = exp_scores / np.sum(exp_scores)
            weights = {source: weights_array[source_to_index[source]] for source in self.data_sources}
        else:
            weights = {source: 1.0 / len(self.data_sources) for source in self.data_sources}
        # not the authors': the UCB scores kept for the test to compare
        self.last_scores = {source: base_scores[source_to_index[source]] for source in self.data_sources}
        return weights

    def get_source_stats(self):
        return {
            source: {
                "advantage_mean": self.estimators[source].mu,
                "n_samples": self.estimators[source].n_samples,
            }
            for source in self.data_sources
        }


# CurriculumSampler, L214-298: the uniform initial weights (L283-285) and ``update_weights`` (L287-298).
class DUMPSampler:
    def __init__(self, source_indices, window_size=300):
        self.source_indices = source_indices
        self.curriculum_controller = CurriculumController(list(self.source_indices.keys()), window_size)
        self._weights = {source: 1.0 / len(self.source_indices) for source in self.source_indices}

    def update_weights(self, source_rewards, source_advantages):
        for source in source_rewards:
            if source in self.curriculum_controller.estimators:
                rewards = np.array(source_rewards[source])
                advantages = np.array(source_advantages[source])
                self.curriculum_controller.estimators[source].update(rewards, advantages)
        self._weights = self.curriculum_controller.compute_sampling_weights()


# ZhentingWang/DUMP verl/trainer/ppo/ray_trainer.py, RayPPOTrainer.fit, L1214-1250 (after compute_advantage).
def dump_train_update(curriculum_sampler, current_data_sources, rewards, advantages, response_mask):
    data_source_rewards = {}
    data_source_advantages = {}
    for i, source in enumerate(current_data_sources):
        if source not in data_source_rewards:
            data_source_rewards[source] = []
            data_source_advantages[source] = []
        sample_rewards = rewards[i].sum()
        sample_advantages = advantages[i][response_mask[i].astype(bool)].mean()
        data_source_rewards[source].append(sample_rewards)
        data_source_advantages[source].append(sample_advantages)
    if data_source_rewards and data_source_advantages:
        curriculum_sampler.update_weights(
            source_rewards=data_source_rewards, source_advantages=data_source_advantages
        )


# ray_trainer.py, RayPPOTrainer._validate, L711-732 and L776-793: "advantages = rewards", then one push of
# the per-source mean per source.
def dump_validation_update(curriculum_sampler, current_data_sources, reward_tensor, response_mask):
    data_source_rewards = {}
    data_source_advantages = {}
    advantages = reward_tensor
    for i, source in enumerate(current_data_sources):
        if source not in data_source_rewards:
            data_source_rewards[source] = []
            data_source_advantages[source] = []
        data_source_rewards[source].append(reward_tensor[i].sum())
        data_source_advantages[source].append(advantages[i][response_mask[i].astype(bool)].mean())
    for source, rewards in data_source_rewards.items():
        advantages = data_source_advantages.get(source, [0.0])
        avg_reward = np.mean(rewards)
        avg_advantage = np.mean(advantages)
        curriculum_sampler.update_weights(
            source_rewards={source: [avg_reward]}, source_advantages={source: [avg_advantage]}
        )


# ------------------------------------------------------------------------------------------------ SEC
# cofa sec/verl/verl/utils/auto_curriculum/priority.py, BanditPriority, L49-187 (``__init__`` L50-68,
# ``init_bandit`` L82-97, ``get_probs`` L99-110, ``update`` L135-184 with objective 'adv',
# ``update_q_values`` L186-187) and JointBandit L190-201. ``dataset`` is a list of ``{'extra_info': ...}``.


class JointBandit:
    def __init__(self, dataset, temperature=1.0, lr=0.1, feature=("difficulty",)):
        self.temperature = temperature
        self.learning_rate = lr
        self.feature = list(feature)
        self.init_bandit(dataset)
        self.q_values = np.zeros(self.num_arms)

    def extra_info_to_group(self, extra_info):
        return "-".join([str(extra_info[feature]) for feature in self.feature])

    def data_to_group(self, data):
        if "difficulty" in data["extra_info"]:
            assert int(data["extra_info"]["difficulty"]) == float(data["extra_info"]["difficulty"])
        return self.extra_info_to_group(data["extra_info"])

    def init_bandit(self, dataset):
        self.idx_to_group = {idx: self.data_to_group(item) for idx, item in enumerate(dataset)}
        self.group_to_idx = {group: [] for group in self.idx_to_group.values()}
        for idx, group in self.idx_to_group.items():
            self.group_to_idx[group].append(idx)
        self.arm_to_group = {i: key for i, key in enumerate(self.group_to_idx.keys())}
        self.group_to_arm = {key: i for i, key in enumerate(self.group_to_idx.keys())}
        self.num_arms = len(self.group_to_idx)

    def get_probs(self, method="boltzmann"):
        assert method == "boltzmann"
        return np.exp(self.q_values / self.temperature) / np.sum(np.exp(self.q_values / self.temperature))

    def update(self, data_info, adv, response_mask):
        obj = adv
        obj = masked_mean(np.abs(obj), response_mask, axis=-1)
        group_to_obj = defaultdict(list)
        for data, obj_val in zip(data_info, obj, strict=True):
            group = self.extra_info_to_group(data)
            group_to_obj[group].append(obj_val.item())
        for group, obj_vals in group_to_obj.items():
            group_to_obj[group] = np.mean(np.abs(obj_vals))
        new_qs = np.zeros(self.num_arms)
        for group, obj_vals in group_to_obj.items():
            new_qs[self.group_to_arm[group]] = obj_vals
        self.update_q_values(new_qs)

    def update_q_values(self, new_q_values):
        self.q_values = (1 - self.learning_rate) * self.q_values + self.learning_rate * new_q_values


# ------------------------------------------------------------------------------------------------ GHPO
# hkgc-1/GHPO src/ghpo/ghpo_trainer.py, GHPOTrainer._generate_and_score_completions: the hint sentence and
# inputs (L830-833), the all-wrong test (L996-1010, repeated at L1045-1059 and L1095-1109) and the
# replacement of the redone groups' rewards (L1042-1043, L1091-1092, L1141-1142).

hint_prompt = "\n The following text is the beginning part of the answer, which you can refer to for solving the problem:\n"


def inputs_hint(inputs, ratio):
    """L831-833 for one ratio (the code writes out 0.25, 0.5 and 0.75)."""
    return [
        {
            "solution": x["solution"],
            "prompt": [
                {"content": x["prompt"][0]["content"], "role": "system"},
                {
                    "content": x["prompt"][1]["content"]
                    + hint_prompt
                    + x["solution_hint"][: round(len(x["solution_hint"]) * ratio)],
                    "role": "user",
                },
            ],
        }
        for x in inputs
    ]


def all_wrong(accuracy_reward, num_of_generation):
    """L997-1010: ``is_all_wrong`` (1 all wrong, 2 the placeholder when none is), the rows to redo and the
    number of groups to redo."""
    is_all_wrong = np.zeros(len(accuracy_reward))
    for x in range(0, len(accuracy_reward), num_of_generation):
        if all(accuracy_reward[x : x + num_of_generation] <= 0):
            is_all_wrong[x : x + num_of_generation] = 1
    if max(is_all_wrong) == 0:
        is_all_wrong[0:num_of_generation] = 2
    true_indices2 = [index for index, value in enumerate(is_all_wrong) if value == 1]
    redo_index = list(set([x // num_of_generation for x in true_indices2]))
    redo_num = len(redo_index)
    return is_all_wrong, true_indices2, redo_num


def cascade(accuracy_by_ratio, num_of_generation, ratios=(0.25, 0.5, 0.75)):
    """The three stages L996-1142 on recorded accuracies: ``accuracy_by_ratio[r]`` is the column-0 reward of
    every row had it been generated with hint ratio ``r`` (0: no hint). Returns the final accuracies and, per
    group, the ratio its final completions were generated with. One rank: the placeholder group (value 2)
    exists only when this rank has nothing to redo, and then no rank has (``redo_num`` all-gathered), so
    ``_generate_and_score_completions_hint`` returns -1 and nothing changes."""
    accuracy_reward = np.array(accuracy_by_ratio[0], dtype=np.float64)
    used = [0.0] * (len(accuracy_reward) // num_of_generation)
    for ratio in ratios:
        is_all_wrong, true_indices2, redo_num = all_wrong(accuracy_reward, num_of_generation)
        if redo_num == 0:
            continue
        for x in range(len(accuracy_reward)):
            if x in true_indices2:
                accuracy_reward[x] = accuracy_by_ratio[ratio][x]
                used[x // num_of_generation] = ratio
    return accuracy_reward, used
