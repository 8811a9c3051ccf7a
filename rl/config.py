"""The RL run configuration: one dataclass tree, loadable from YAML, overridable from the command line.

>>> cfg = load_config(preset="grpo", overrides=["algorithm.kl_coef=0.01", "rollout.n=4"])
>>> cfg.algorithm.kl_coef, cfg.rollout.n
(0.01, 4)

Every field has a docstring and a default. Presets (``grpo``, ``dr_grpo``, ``dapo``, ``rloo``,
``reinforce_pp``, ``ppo``, ``grpo_prm``) set the fields where the papers differ; their YAML copies live in
``rl/configs/``. The precedence is: dataclass defaults < preset < YAML file < ``--set`` overrides.

A field's bounds and allowed values are declared on the field (:func:`rewardlab.config.option`), so adding
an option is one edit::

    top_k: int = option(0, ge=0, note="0: off")    # rollout.top_k must be >= 0 (0: off), got -1

:func:`validate` (:mod:`rewardlab.rl.config_checks`) refuses a value outside them, and the combinations of
several fields a run cannot honour, when the config loads; the documentation lists them
(:func:`field_docs`).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rewardlab.config import (
    ConfigError,
    Renamed,
    apply_override,
    build,
    dump,
    load,
    names_in,
    option,
    parse_literal,
    read_config_file,
)
from rewardlab.config import field_docs as _field_docs
from rewardlab.envs.config import EnvConfig
from rewardlab.generation import BACKENDS
from rewardlab.rl.config_checks import validate
from rewardlab.rl.presets import PRESETS
from rewardlab.rl.prompt_filter import FILTER_MODES
from rewardlab.training.config import REPORT_TO, BaseTrainingConfig

__all__ = [
    "PRESETS",
    "ConfigError",
    "RLConfig",
    "apply_override",
    "config_from_dict",
    "dump_config",
    "field_docs",
    "load_config",
    "preset_yaml",
    "reference_table",
    "validate",
]

SECONDS = "a positive number of seconds"
"""What a timeout must be (``gt=0, finite=True``), as errors and the docs say it."""


@dataclass
class LoRAConfig:
    """LoRA adapters on the policy (Hu et al., 2021), QLoRA (Dettmers et al., 2023); ``r: 0`` trains every
    weight."""

    r: int = option(0, ge=0, note="0: off")
    """Adapter rank; 0 (off) trains every weight. ``16`` is a common choice (``--set model.lora.r=16``)."""
    alpha: int = option(32, gt=0)
    """The update is ``alpha / r * B @ A`` (TRL's default 32: twice the common rank 16)."""
    dropout: float = option(0.0, ge=0, lt=1)
    """Dropout on the adapters' input (peft's default 0: with dropout, the trainer's log-probs of one policy
    are random, and so are its ratios and KL)."""
    target_modules: str | list[str] = "all-linear"
    """Layers that get an adapter: ``all-linear`` (every linear layer but the output head, as QLoRA) or a
    list of module names (``[q_proj, v_proj]``, the LoRA paper's choice)."""
    load_in_4bit: bool = False
    """QLoRA: load the frozen base in 4-bit NF4 with double quantisation, bf16 compute (bitsandbytes, CUDA
    only)."""

    @property
    def enabled(self) -> bool:
        return self.r > 0


@dataclass
class ModelConfig:
    """The policy (and, derived from it, the reference and value models)."""

    path: str = "tiny:qwen2-tiny"
    """Hub name or local folder of a causal LM; ``tiny:NAME`` builds a shipped tiny config
    (``tiny:qwen2-tiny``, ``tiny:qwen2-small``, ``tiny:llama-tiny``) with random weights."""
    tokenizer: str | None = None
    """Tokenizer path; ``None`` uses the model's (the shipped char-level one for ``tiny:``)."""
    dtype: str = option("float32", choices=names_in("rewardlab.training.device:DTYPES", "auto"))
    """Weights dtype: ``float32``, ``bfloat16`` or ``auto`` (bf16 where the hardware has it, else fp32)."""
    chat_template: bool = False
    """Wrap each prompt as a user message with the tokenizer's chat template."""
    gradient_checkpointing: bool = False
    """Trade compute for memory in the backward pass."""
    seed: int = 0
    """Seed for ``tiny:`` weight initialisation."""
    lora: LoRAConfig = field(default_factory=LoRAConfig)
    """Train LoRA adapters instead of every weight (off by default)."""


@dataclass
class DataConfig:
    """Where the prompts come from."""

    path: str = "arithmetic"
    """A JSONL file or dataset name for ``rewardlab.data.loaders.load_records``, ``arithmetic`` (the
    generated demo problems) or ``arithmetic_levels`` (1- to 4-digit problems as four sources, ``digits1`` ..
    ``digits4``, with a difficulty and a worked digit-by-digit solution each; ``eval_path: arithmetic_levels``
    is their held-out set)."""
    field_map: dict[str, str] = field(default_factory=dict)
    """Record field -> column name, e.g. ``{"reference": "answer"}``."""
    split: str | None = None
    """Dataset split (for hub-style datasets)."""
    difficulty_field: str | None = None
    """The column holding a prompt's difficulty (a number, or MATH's ``"Level 3"``); ``None``: ``difficulty``
    or ``level`` when present. Read by the curricula (``algorithm.curriculum``)."""
    source_field: str | None = None
    """The column naming a prompt's source or category; ``None``: ``source``, ``data_source`` or ``category``
    when present. Held-out accuracy is reported per source too."""
    prompt_template: str = "{prompt}"
    """Format string applied to each prompt text before generation."""
    num_examples: int = 20000
    """For ``arithmetic``: how many training problems to generate."""
    arithmetic_max_value: int = 99
    """For ``arithmetic``: largest operand."""
    arithmetic_ops: str = "+-"
    """For ``arithmetic``: operators to draw from."""
    arithmetic_min_value: int = 0
    """For ``arithmetic``: smallest operand."""
    arithmetic_carry: bool = True
    """For ``arithmetic``: ``false`` draws only problems solved without carrying / borrowing."""
    arithmetic_levels: list[int] = field(default_factory=lambda: [1, 2, 3, 4])
    """For ``arithmetic_levels``: the operand lengths (digits), one source each; ``num_examples`` is split
    evenly between them."""
    shuffle: bool = True
    """Shuffle the prompts each epoch (seeded by ``train.seed``)."""
    eval_path: str | None = None
    """Held-out prompts for greedy pass@1 (``arithmetic`` uses the shipped held-out set); ``None``: no eval."""
    eval_limit: int | None = None
    """Evaluate on the first N held-out prompts only."""


@dataclass
class TreeConfig:
    """Tree rollouts (TreeRL, Hou et al., 2025; Tree-GRPO, Ji et al., 2025): ``roots`` samples per prompt,
    then ``branches`` continuations from each of ``points`` positions of every root, so that samples share
    prefixes that are generated once. The group is the prompt's whole forest:
    ``rollout.n = roots * (1 + points * branches)``."""

    roots: int = option(0, ge=0, note="0: off")
    """Roots per prompt (m); 0: no tree, ``rollout.n`` independent samples."""
    branches: int = option(2, ge=1)
    """Continuations sampled from each branch position (k)."""
    points: int = option(1, ge=1)
    """Branch positions per root (t)."""
    branch_at: str = option("entropy", choices=names_in("rewardlab.core_algos:BRANCH_RULES"))
    """Where to branch: ``entropy``, the root's highest-entropy tokens (TreeRL's forking tokens; one forward
    pass over the roots), or ``uniform``, evenly spaced positions."""
    intra_tree_coef: float = option(0.0, ge=0, note="0: off")
    """Weight of Tree-GRPO's intra-tree advantage (each sample against its own tree), added to the group's
    advantage; Tree-GRPO uses 1 (their sum). 0: the group's advantage only."""

    @property
    def samples_per_prompt(self) -> int:
        return self.roots * (1 + self.points * self.branches)


@dataclass
class RolloutConfig:
    """Sampling the completions."""

    backend: str = option("hf", choices=BACKENDS.names)
    """Rollout engine: ``hf`` is transformers' generate (the CPU default), ``vllm`` an engine colocated with
    training, ``vllm-server`` a separate ``vllm serve`` process (``rewardlab rl serve-vllm``) on other
    devices or nodes, its weights synced every step."""
    n: int = option(8, ge=1)
    """Samples per prompt (the group size G). DeepSeekMath uses 64, TRL's default is 8."""
    temperature: float = option(1.0, ge=0, note="0: greedy")
    """Sampling temperature (also divides the trainer's logits, so both see the same policy)."""
    top_p: float = option(1.0, gt=0, le=1)
    """Nucleus sampling mass."""
    top_k: int = option(0, ge=0, note="0: off")
    """Top-k sampling (0: off)."""
    max_new_tokens: int = option(256, ge=1)
    """Most tokens per completion; longer ones are truncated (``finish_reason="length"``)."""
    stop: list[str] = field(default_factory=list)
    """Stop strings."""
    batch_size: int = option(64, ge=1)
    """hf backend: most sequences per ``generate`` call (multi-turn: most episodes decoding at once)."""
    stream_rewards: bool = True
    """Score each sample the moment it ends, while the rest of the batch decodes (the hf backend per row,
    vLLM per request, multi-turn per episode): the step waits only for the last reward. Applies to the sources
    behind a warm scoring pool (verifiers, ``http:``, ``rm:``); sources that read whole groups or the policy
    (``ttrl``, ``self_certainty``, ``py:``, reward functions given in code) still score after generation.
    Rewards are the same either way."""
    interleave_turns: bool = True
    """hf backend, multi-turn episodes: one decoding loop, each episode's next turn starting as soon as the
    environment has answered, its earlier turns kept in the KV cache (vLLM's continuous batching). Off: one
    ``generate`` call per turn, every running episode waiting for the turn's slowest."""
    vllm_gpu_memory_utilization: float = 0.3
    """vllm backend: fraction of device memory for the engine (colocated with training)."""
    vllm_kwargs: dict[str, Any] = field(default_factory=dict)
    """vllm backend: extra ``LLM(...)`` arguments."""
    vllm_sleep_level: int = option(0, choices=names_in("rewardlab.generation.vllm:SLEEP_LEVELS"))
    """vllm backend: vLLM's sleep mode (CUDA, ROCm, XPU), which frees the engine's memory during each update:
    0 off; 1 parks the weights in host memory and drops the KV cache; 2 drops both (the update refills the
    weights; TRL's ``vllm_enable_sleep_mode``)."""
    vllm_lora: str = option("merged", choices=names_in("rewardlab.generation.vllm:LORA_MODES"))
    """vllm backend, LoRA policy: ``merged`` pushes every weight with the adapters folded in after each
    update; ``adapter`` loads the base once and pushes only the adapter (vLLM's ``enable_lora``), which
    moves less data per step but makes every decoding step compute the adapter's extra matmuls."""
    vllm_server_url: str = "http://127.0.0.1:8000"
    """vllm-server backend: the server's address."""
    vllm_server_sync: str = option("disk", choices=names_in("rewardlab.generation.vllm_server:SYNC_MODES"))
    """vllm-server backend: how the policy's weights reach the server after each update. ``disk``:
    safetensors in ``vllm_server_sync_dir``, reloaded in place by every worker (any device, a filesystem
    both sides see); ``nccl``: vLLM's NCCL weight transfer, trainer rank 0 to the workers (GPUs; the server
    started with ``--weight-transfer-config '{"backend": "nccl"}'``)."""
    vllm_server_sync_dir: str = ""
    """vllm-server backend, ``disk`` sync: the folder (empty: ``RUN_DIR/vllm-sync``)."""
    vllm_server_nccl_address: str = ""
    """vllm-server backend, ``nccl`` sync: this trainer's address as the server reaches it (empty: the host
    name's address)."""
    vllm_server_nccl_port: int = 51216
    """vllm-server backend, ``nccl`` sync: the rendezvous port on the trainer (TRL's default group port)."""
    vllm_server_timeout: float = option(600.0, gt=0, finite=True, must=SECONDS)
    """vllm-server backend: seconds to wait for the server to come up, and for one request."""
    tree: TreeConfig = field(default_factory=TreeConfig)
    """Tree rollouts (off by default)."""
    async_staleness: int = option(0, ge=0, le=8, note="0: synchronous")
    """Asynchronous off-policy rollouts: generation of the next steps' batches runs in a thread, with a copy
    of the policy, while the current step's update runs; a batch is trained at most this many updates after
    the weights that sampled it (1-2 as verl's one-step-off-policy and AReaL bound it). Set
    ``algorithm.rollout_is`` to correct for the lag with the sampler's own log-probs. 0: synchronous."""


@dataclass
class RewardSourceConfig:
    """One reward source: a verifier or a reward model, with a weight."""

    name: str = "math"
    """Verifier name (``math``, ``code``, ``sql``, ``ifeval``, ``format``, ``choice``, ``qa``, ``json``; open-r1's
    shaping rewards ``repetition_penalty``, ``cosine_length``), ``rm:PATH`` for a reward model,
    ``py:module:fn`` for a reward function, ``http:URL`` for a reward server (docs/remote.md), or a
    label-free source: ``ttrl`` (majority vote of the group, Zuo et al. 2025) or ``self_certainty`` (the
    policy's certainty, Zhao et al. 2025)."""
    weight: float = 1.0
    """Weight in the summed reward."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Constructor arguments of the verifier / reward model (an ``http:`` source: ``timeout``, ``batch_size``,
    ``concurrency``, ``retries``, ``protocol``, ``api_key_env``...)."""


@dataclass
class RewardConfig:
    """Turning completions into rewards."""

    sources: list[RewardSourceConfig] = field(default_factory=lambda: [RewardSourceConfig()])
    """Reward sources, summed with their weights; each is logged as ``rewards/NAME/mean``."""
    workers: int = option(1, ge=0, note="0: score in this process")
    """Scoring worker processes (a warm pool kept for the whole run)."""
    timeout: float = option(10.0, gt=0, finite=True, must=SECONDS)
    """Per-sample scoring timeout in CPU seconds of the scoring worker (a wall-clock cap of 10x stops a sample
    that waits); a timeout is reward 0 with a counted error."""
    shaping: list[dict[str, Any]] = field(default_factory=list)
    """Shaping transforms from ``rewardlab.rewardmodels.shaping``, applied in order: ``{"name": ..., **kwargs}``."""
    truncation: str = option(
        "penalize", choices=names_in("rewardlab.rewardmodels.shaping.functional:TRUNCATION_MODES")
    )
    """Completions cut at ``max_new_tokens``: ``penalize`` replaces their reward by ``truncation_penalty``
    (the default: a cut-off completion is never a clean solve, whatever its text scores), ``mask`` removes
    them from the loss (DAPO overlong filtering), ``none`` keeps their reward (TRL's and verl's default)."""
    truncation_penalty: float = -1.0
    """Reward of a truncated completion under ``truncation: penalize`` (below a wrong answer's 0 for 0/1
    rewards, so the policy learns to finish its answer)."""
    overlong_buffer: int = option(0, ge=0, note="0: off")
    """DAPO soft overlong punishment: length of the buffer before ``max_new_tokens`` (0: off)."""
    overlong_penalty_factor: float = 1.0
    """DAPO soft overlong punishment: its scale."""
    process: str | None = None
    """Per-step (process) reward scorer: ``prm:PATH`` (a trained ``ProcessRewardModel``),
    ``correct_looking`` (the reward-hacking testbed's scripted scorer), ``py:module:Class``, or PRIME's
    implicit PRM trained online for ``algorithm.adv_estimator: prime``: ``implicit_prm:PATH`` (a saved one, or
    any causal LM: both it and its frozen reference start there) or ``implicit_prm`` (both from the policy's
    initial weights, as PRIME); ``None``: off."""
    process_kwargs: dict[str, Any] = field(default_factory=dict)
    """Constructor / ``from_pretrained`` arguments of the process scorer."""
    step_shaping: str = option("clip+delta", choices=names_in("rewardlab.rewardmodels.shaping:STEP_SHAPINGS"))
    """How step scores become rewards (Gao et al., 2024's Clip and Delta, or ``none``)."""
    step_eta: float = 0.0
    """Gao et al.'s eta: the threshold of Clip (``min(r - eta, 0)``)."""
    success_weight: float = 1.0
    """Weight of the outcome (verifier) reward on the last token when process rewards are on."""
    step_weight: float = 1.0
    """Weight of the shaped step rewards on their step-end tokens."""
    implicit_prm_beta: float | None = option(None, gt=0, finite=True, must="> 0, or null (the PRM's own)")
    """``implicit_prm``: beta of its rewards ``beta * log(pi_phi / pi_ref)``; ``None``: a saved PRM's own
    (``rewardlab_implicit_prm.json``), else PRIME's ``beta_train`` 0.05."""
    implicit_prm_update: bool = True
    """``implicit_prm``: train it online on each step's outcomes (label: reward > 0) after scoring the step's
    samples and before the advantages (PRIME's ``prime_model.update: after``); off: a fixed PRM."""
    implicit_prm_lr: float = option(1e-6, gt=0, finite=True)
    """``implicit_prm``: its AdamW learning rate, constant, weight decay 0 (PRIME's ``prime_model.optim``)."""
    implicit_prm_loss: str = option("ce", choices=("ce",))
    """``implicit_prm``: the update's loss; ``ce``, the cross-entropy of ``sigmoid(sum of token rewards)``
    against the outcome label (PRIME's ``loss_type``)."""
    implicit_prm_grad_clip: float = option(10.0, gt=0, finite=True)
    """``implicit_prm``: gradient-norm clip of its steps (PRIME's runs: ``optim.grad_clip=10.0``)."""
    implicit_prm_minibatches: int = option(1, ge=1)
    """``implicit_prm``: its optimiser steps per RL step, the batch cut in order; a later minibatch is scored
    after the earlier steps (PRIME's runs: 4, their batch over ``reward_model.mini_batch_size``)."""
    implicit_prm_granularity: str = option(
        "token", choices=names_in("rewardlab.core_algos.prime:PRIME_GRANULARITIES")
    )
    """``implicit_prm``: ``token``, a process reward on every response token, or ``whole``, their sum on the
    last (PRIME's ``prime_granularity``)."""
    implicit_prm_norm: str = option("batch_norm", choices=names_in("rewardlab.core_algos.prime:PRIME_NORMS"))
    """``implicit_prm``: ``batch_norm`` divides the process rewards by the batch's largest absolute
    reward-to-go, ``none`` keeps beta's scale (PRIME's ``prime_norm``)."""
    length_budget: str = option(
        "none", choices=names_in("rewardlab.rewardmodels.shaping.functional:LENGTH_BUDGET_MODES", "none")
    )
    """L1 length control (Aggarwal & Welleck, 2025): each prompt asks for a token budget ("Think for N
    tokens.") drawn from [``length_budget_min``, ``length_budget_max``], and the reward becomes ``exact``:
    ``1[correct] - alpha |N - n|`` or ``max``: ``1[correct] clip(alpha (N - n) + delta, 0, 1)``; ``none``:
    off."""
    length_budget_alpha: float | None = option(None, gt=0, finite=True, must="> 0, or null (the paper's)")
    """L1's alpha; ``None``: the paper's (0.0003 for ``exact``, 0.001 for ``max``)."""
    length_budget_delta: float = option(0.5, ge=0, le=1)
    """L1-Max's delta (the reward of a correct answer exactly at its budget)."""
    length_budget_min: int = option(100, ge=1)
    """Smallest budget drawn (L1: 100 tokens)."""
    length_budget_max: int = 4000
    """Largest budget drawn at the start of training (L1: 4000 tokens)."""
    length_budget_final_max: int = option(0, ge=0, note="0: no curriculum")
    """Shrinking-budget curriculum (long2short): the largest budget falls linearly from
    ``length_budget_max`` to this over ``train.max_steps``; 0: no curriculum (L1's fixed range). Evaluation asks
    for the current largest budget."""


@dataclass
class PromptFilterConfig:
    """Pre-rollout prompt selection (``algorithm.prompt_filter``: ``mode`` and its settings)."""

    mode: str = option("none", choices=FILTER_MODES)
    """Pre-rollout prompt selection from each prompt's earlier groups (``rl/prompt_filter.py``): ``band``
    keeps prompts whose last pass rate lies in [``low``, ``high``] (Bae et al., 2025, online difficulty
    filtering); ``greso`` skips prompts after runs of zero-variance groups with a self-adjusting probability
    (Zheng et al., 2025, GRESO); ``none``: off. Prompts never seen are always kept; pays off when training
    runs several epochs over its prompts."""
    low: float = option(0.2, ge=0, le=1)
    """``band``: the lowest pass rate kept (0.2, Bae et al.'s balanced band as its write-ups give it)."""
    high: float = option(0.8, ge=0, le=1)
    """``band``: the highest pass rate kept."""
    window: int = option(1, ge=1)
    """``band``: the pass rate is the mean of the prompt's last this many groups."""
    p_easy: float = option(0.5, ge=0, le=1)
    """``greso``: the initial exploration probability of prompts whose groups were all right (GRESO's
    scripts: 0.5); a prompt with z such groups in a row is rolled out with probability ``p**z``."""
    p_hard: float = option(0.5, ge=0, le=1)
    """``greso``: the same for prompts whose groups were all wrong (0.5)."""
    target_zero_var: float = option(0.25, ge=0, le=1)
    """``greso``: the share of zero-variance groups the probabilities are adjusted toward (0.25, a third
    easy and two thirds hard, by 0.01 a step)."""
    max_draws: int = option(4, ge=1)
    """Most candidates drawn per step, as a multiple of ``train.prompts_per_step``; when the filter rejects
    more, the batch is filled with the rejected candidates taken last (a step never trains on fewer)."""

    @property
    def enabled(self) -> bool:
        return self.mode != "none"


def _is_mode(value: Any) -> bool:
    """``prompt_filter: band``, the spelling from before the section: a string where the section now is."""
    return isinstance(value, str)


@dataclass
class CurriculumConfig:
    """Which prompts to train on next (``algorithm.curriculum``: ``name`` and its settings; ``rl/curriculum.py``).
    The curriculum draws the prompts, the prompt filter then decides which of those to roll out."""

    name: str = option("none", choices=names_in("rewardlab.rl.curriculum:CURRICULA"))
    """``none`` (the seeded epoch order), ``adarft`` (a target difficulty following the mean reward; Shi et al.,
    2025), ``dump`` (UCB over sources by mean |advantage|; Wang et al., 2025), ``sec`` (a TD(0) bandit over
    sources or levels; Chen et al., 2025), ``vcrl`` (group-reward variance, replayed from a memory bank; Jiang
    et al., 2025), ``reverse`` (rollouts from a shrinking demonstration prefix, R^3; Xi et al., 2024),
    ``guided_hints`` (unsolved groups re-sampled with part of the solution, GHPO; Liu et al., 2025)."""
    arms: str = option("source", choices=("source", "difficulty"))
    """``dump`` and ``sec``: what an arm is, the prompt's source (DUMP's ``data_source``) or its difficulty
    level (SEC's math runs)."""
    solution_field: str = "solution"
    """``reverse`` and ``guided_hints``: the metadata field with the worked solution to cut."""
    adarft_eta: float | None = option(None, gt=0, finite=True, must="> 0, or null (half the range)")
    """AdaRFT's step size eta; ``None``: half the difficulty range, the paper's 50 on its 0-100 scale."""
    adarft_alpha: float = option(2.0, gt=0, finite=True)
    """AdaRFT's sensitivity alpha (the paper's 2)."""
    adarft_beta: float = option(0.5, ge=0, le=1)
    """AdaRFT's target reward beta (the paper's 0.5)."""
    adarft_initial: float | None = None
    """AdaRFT's initial target difficulty; ``None``: the easiest (the authors' T = 0 on 0-100)."""
    d_min: float | None = None
    """AdaRFT's lowest target; ``None``: the data's lowest difficulty."""
    d_max: float | None = None
    """AdaRFT's highest target; ``None``: the data's highest difficulty."""
    dump_window: int = option(300, ge=1)
    """DUMP: the samples per source its mean |advantage| is taken over (the authors' 300)."""
    dump_temperature: float = option(0.1, gt=0, finite=True)
    """DUMP: the softmax temperature over UCB scores (0.1)."""
    dump_exploration: float = option(1.0, ge=0, finite=True)
    """DUMP: the weight of the UCB bonus ``sqrt(2 ln(N + 1) / (n + 1))`` (1.0)."""
    sec_lr: float = option(0.5, gt=0, le=1)
    """SEC: the TD(0) learning rate (the paper's runs: 0.5)."""
    sec_temperature: float = option(0.4, gt=0, finite=True)
    """SEC: the Boltzmann temperature (the paper's math runs: 0.4; Countdown 1.0, puzzles 0.2)."""
    vcrl_threshold: float = option(0.5, ge=0, le=1)
    """VCRL: the normalised variance ``p`` from which a prompt enters the memory bank (ours: the paper's value
    could not be read here)."""
    vcrl_bank_size: int = option(256, ge=1)
    """VCRL: the memory bank's size (ours)."""
    vcrl_replay: float = option(0.5, ge=0, le=1)
    """VCRL: the largest share of a batch taken from the memory bank (ours)."""
    reverse_schedule: str = option("staged", choices=("staged", "mixed"))
    """R^3: ``staged`` (the prefix shrinks stage by stage) or ``mixed`` (every prefix length at random, as the
    authors' released data)."""
    reverse_stages: int = option(4, ge=1)
    """R^3 ``staged``: stages from ``L - 1`` given steps down to none."""
    reverse_advance_reward: float = option(0.5, finite=True)
    """R^3 ``staged``: the batch mean reward that moves to the next stage."""
    hint_fractions: list[float] = field(default_factory=lambda: [0.25, 0.5, 0.75])
    """GHPO: the shares of the solution (in characters) given as hints, tried in order while a group solves
    nothing (its code: 25%, 50%, 75%)."""
    hint_style: str = option("prompt", choices=("prompt", "prefix"))
    """GHPO: the hint at the end of the user message after GHPO's sentence (``prompt``), or as the start of
    the response (``prefix``, for models that never saw the sentence)."""

    @property
    def enabled(self) -> bool:
        return self.name != "none"


@dataclass
class AlgorithmConfig:
    """Advantages, policy loss, KL, filtering."""

    # Old name -> new; the string spelling first, so that the flat keys after it merge into its section.
    DEPRECATED = {
        "prompt_filter": Renamed("prompt_filter.mode", when=_is_mode),
        "prompt_filter_low": "prompt_filter.low",
        "prompt_filter_high": "prompt_filter.high",
        "prompt_filter_window": "prompt_filter.window",
        "greso_p_easy": "prompt_filter.p_easy",
        "greso_p_hard": "prompt_filter.p_hard",
        "greso_target_zero_var": "prompt_filter.target_zero_var",
        "prompt_filter_max_draws": "prompt_filter.max_draws",
    }

    adv_estimator: str = option("grpo", choices=names_in("rewardlab.core_algos:ADVANTAGE_ESTIMATORS"))
    """Advantage estimator (``gae`` is PPO's; ``step_return`` uses process rewards; ``prime``, PRIME's, an
    implicit PRM's, ``reward.process: implicit_prm``)."""
    adv_eps: float = option(1e-6, gt=0)
    """GRPO: epsilon added to the group std."""
    adv_scale: str = option("group", choices=names_in("rewardlab.core_algos:ADV_SCALES"))
    """GRPO: ``group`` std, ``batch`` std or ``none`` (Dr.GRPO); ``step_return``: ``group`` or ``none``."""
    step_baseline: str = option("rloo", choices=names_in("rewardlab.core_algos:STEP_BASELINES"))
    """``step_return`` (process rewards): baseline of the trajectories' total returns, ``rloo``, ``mean``,
    ``none``."""
    policy_loss: str = option("ppo", choices=names_in("rewardlab.core_algos:POLICY_LOSSES"))
    """Policy loss: ``ppo`` is the clipped surrogate with a token ratio, ``gspo`` uses the sequence ratio,
    ``cispo`` clips the importance weight instead of the update; ``clip_cov`` and ``kl_cov`` (Cui et al.,
    2025) hold back the few tokens whose log-probability and advantage covary most (entropy collapse)."""
    clip_ratio_low: float = option(0.2, ge=0)
    """Lower clip epsilon of the ratio."""
    clip_ratio_high: float = option(0.2, ge=0)
    """Upper clip epsilon (DAPO clip-higher: 0.28)."""
    clip_ratio_c: float | None = option(None, gt=1, must="> 1, or null (off)")
    """Dual-clip constant c > 1 (e.g. 3.0); ``None``: off."""
    clip_cov_ratio: float = option(2e-4, gt=0, le=1)
    """``clip_cov``: share of the micro-batch's tokens whose gradient is cut (Cui et al., 2025: 2e-4; verl's
    default)."""
    clip_cov_lb: float = 1.0
    """``clip_cov``: a token is a candidate when its covariance lies above this bound (paper: 1)."""
    clip_cov_ub: float = 5.0
    """``clip_cov``: ... and below this one (paper: 5)."""
    kl_cov_ratio: float = option(2e-4, gt=0, le=1)
    """``kl_cov``: share of the micro-batch's tokens with the highest covariance that get the KL penalty
    (verl's default and the paper's 32B setting; its 7B runs use 2e-3)."""
    ppo_kl_coef: float = option(1.0, ge=0)
    """``kl_cov``: coefficient of the ``|log pi - log pi_old|`` penalty on those tokens (the paper's beta = 1;
    verl's function default, its YAML has 0.1)."""
    top_entropy_quantile: float = option(1.0, gt=0, le=1, note="1: every token")
    """Train only on the highest-entropy tokens (Wang et al., 2025, "Beyond the 80/20 Rule": 0.2): the policy
    loss of a token below the micro-batch's ``1 - q`` entropy quantile is zeroed, the normaliser still counts
    it (TRL's ``top_entropy_quantile``). 1.0: every token."""
    loss_agg_mode: str = option(
        "seq-mean-token-mean", choices=names_in("rewardlab.core_algos:LOSS_AGG_MODES")
    )
    """How token losses become one number: ``seq-mean-token-mean`` is the GRPO paper's,
    ``seq-mean-token-sum-norm`` Dr.GRPO's constant normaliser, ``token-mean`` DAPO's."""
    kl_coef: float = option(0.0, ge=0)
    """KL coefficient beta (the initial one under ``kl_ctrl: adaptive``); 0 loads no reference model."""
    kl_ctrl: str = option("fixed", choices=names_in("rewardlab.core_algos:KL_CONTROLLERS"))
    """``fixed`` keeps ``kl_coef``; ``adaptive`` drives the measured per-token KL toward ``kl_target``
    (Ziegler et al., 2019; verl's ``kl_ctrl.type``)."""
    kl_target: float = option(0.1, gt=0)
    """``kl_ctrl: adaptive``: the target per-token KL (verl's ``target_kl``)."""
    kl_horizon: int = option(10000, ge=1)
    """``kl_ctrl: adaptive``: the horizon, in samples, over which the error is corrected."""
    kl_estimator: str = option("k3", choices=names_in("rewardlab.core_algos:KL_ESTIMATORS"))
    """KL estimator (Schulman, 2020): ``k1`` is ``log r``, ``k2`` half its square, ``k3`` the unbiased
    low-variance one."""
    use_kl_in_reward: bool = False
    """Put the KL in the token rewards (REINFORCE++, RLOO, PPO-RLHF) instead of the loss (GRPO)."""
    entropy_coef: float = option(0.0, ge=0)
    """Entropy bonus coefficient (subtracted from the loss)."""
    gamma: float = option(1.0, ge=0, le=1)
    """Discount (REINFORCE++ returns, GAE)."""
    lam: float = option(1.0, ge=0, le=1)
    """GAE lambda."""
    vf_coef: float = option(0.5, ge=0)
    """PPO: value loss weight."""
    cliprange_value: float | None = 0.2
    """PPO: value clipping range; ``None``: off."""
    dynamic_sampling: bool = False
    """DAPO: drop groups whose rewards all agree and refill the batch."""
    max_refill_rounds: int = option(3, ge=0)
    """DAPO: most extra generation rounds to refill a batch."""
    recompute_old_logprobs: bool = True
    """Recompute pi_old with the trainer (default); ``False`` trusts the rollout's log-probs."""
    rollout_is: str = option("none", choices=names_in("rewardlab.core_algos:IS_LEVELS", "none"))
    """Rollout/trainer mismatch correction: truncated importance sampling per ``token`` or per
    ``sequence``, or ``none``."""
    rollout_is_cap: float = option(2.0, gt=1)
    """The cap C of truncated IS weights."""
    rollout_is_mask: bool = False
    """Remove samples whose sequence ratio leaves [1/C, C] from the loss."""
    prompt_filter: PromptFilterConfig = field(default_factory=PromptFilterConfig)
    """Pre-rollout prompt selection (off by default)."""
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    """Which prompts to draw next (off by default: the seeded epoch order)."""
    passk_k: int = option(4, ge=1)
    """``passk`` estimator (Chen et al., 2025, Pass@k Training): the k whose pass@k the advantages optimise;
    at most ``rollout.n``; set it to the k you evaluate pass@k at."""
    prime_rm_coef: float = option(5.0, ge=0, finite=True)
    """``prime`` estimator: weight of the implicit process rewards' leave-one-out term (PRIME's
    ``reward_dpo_coef`` / ``rm_coef``: 5)."""
    prime_outcome_coef: float = option(5.0, ge=0, finite=True)
    """``prime`` estimator: weight of the outcome reward's leave-one-out term (PRIME's ``reward_gt_coef`` /
    ``verifier.reward_coef``: 5)."""
    positive_adv_weight: float = option(1.0, ge=0, finite=True)
    """Positive sample reinforcement weight (Zhu et al., 2025, "The Surprising Effectiveness of Negative
    Reinforcement"): multiplies advantages > 0. Their W-REINFORCE uses 0.1; 0 trains on negative samples
    only (NSR)."""
    negative_adv_weight: float = option(1.0, ge=0, finite=True)
    """Negative sample reinforcement weight: multiplies advantages < 0 (0 trains on positive samples only,
    PSR)."""


def _betas(betas: Any) -> dict[str, Any]:
    """The former ``train.betas: [b1, b2]`` as ``adam_beta1`` and ``adam_beta2``."""
    if isinstance(betas, str):
        betas = parse_literal(betas)
    if not isinstance(betas, (list, tuple)) or len(betas) != 2:
        raise ConfigError(f"train.betas: expected [beta1, beta2], got {betas!r}")
    return {"adam_beta1": betas[0], "adam_beta2": betas[1]}


@dataclass
class TrainConfig(BaseTrainingConfig):
    """Optimisation, logging and checkpoints (the shared fields of
    :class:`~rewardlab.training.config.BaseTrainingConfig`, with RL's defaults)."""

    DEPRECATED = {
        "lr": "learning_rate",
        "lr_schedule": "lr_scheduler_type",
        "betas": Renamed("adam_beta1/adam_beta2", _betas),
        "steps": "max_steps",
        "micro_batch_size": "per_device_train_batch_size",
    }
    UNSUPPORTED = {
        "gradient_accumulation_steps": "RL accumulates the micro-batches of each minibatch (set "
        "train.minibatches and train.per_device_train_batch_size)",
        "warmup_ratio": "use train.warmup_steps",
        "adam_epsilon": "the RL trainer's AdamW keeps eps 1e-8",
    }

    max_steps: int = option(100, ge=0)
    """Training steps (rollout + update rounds)."""
    per_device_train_batch_size: int = option(16, ge=1)
    """Samples per forward/backward on each device (gradient accumulation inside a minibatch)."""
    learning_rate: float = option(1e-6, gt=0)
    """Peak learning rate (AdamW)."""
    lr_scheduler_type: str = option("constant", choices=names_in("rewardlab.training.optim:SCHEDULES"))
    """Learning-rate decay after warm-up."""
    warmup_steps: int = option(0, ge=0)
    """Linear warm-up (in optimiser steps)."""
    max_grad_norm: float = option(1.0, gt=0)
    """Gradient clipping norm (the RL trainer always clips)."""
    # The base's fields with RL's checks; their docstrings are the base's.
    weight_decay: float = option(0.0, ge=0)
    report_to: list[str] = option(default_factory=lambda: ["tensorboard"], choices=REPORT_TO)
    seed: int = 0
    """Seeds sampling, data order and everything else."""
    save_steps: int = option(0, ge=0, note="0: only at the end")
    """Checkpoint every N steps (0: only at the end)."""
    save_total_limit: int | None = option(2, ge=0, note="0 or null: all")
    """How many step checkpoints to keep (0 or ``None``: all)."""
    eval_steps: int = option(0, ge=0, note="0: before and after")
    """Greedy pass@1 on the eval set every N steps (0: only before and after)."""
    logging_steps: int = option(1, ge=1)
    """Console line every N steps (JSONL gets every step)."""
    prompts_per_step: int = option(8, ge=1)
    """Prompts per step (the batch is ``prompts_per_step * rollout.n`` samples)."""
    epochs: int = option(1, ge=1)
    """Optimisation epochs over each rollout batch (PPO's K; GRPO's mu)."""
    minibatches: int = option(1, ge=1)
    """Optimiser steps per epoch (the rollout batch is split into this many minibatches)."""
    micro_batch_tokens: int = option(0, ge=0, note="0: off")
    """With ``padding_free``: micro-batches of about this many tokens (prompt + response) each instead of
    ``per_device_train_batch_size`` samples, longest sequences first into the least-loaded one (verl's
    ``use_dynamic_bsz`` / ``ppo_max_token_len_per_gpu``); 0: off. Under DDP/FSDP every rank runs as many
    micro-batches as the rank that needs the most."""
    value_lr: float = option(1e-5, gt=0)
    """PPO: value model learning rate."""
    skip_zero_advantage: bool = True
    """Skip the forward/backward of samples whose advantage is 0 on every token (all-equal groups) when the
    loss has no KL / entropy term: the gradient is unchanged (normalisers still count them), the time is not."""
    padding_free: bool = False
    """Pack each micro-batch's sequences into one row with no pad tokens (position ids restart per sequence;
    block-diagonal causal attention, flash-attention's varlen kernel when used) for every policy, reference
    and value forward pass; the same log-probs and gradients as padded rows."""
    logprob_chunk_tokens: int = option(512, ge=0, note="0: the full logits")
    """Read log-probs, entropies and self-certainty from the last hidden states, the LM head applied to this
    many tokens at a time and recomputed in the backward, so that the ``(tokens, vocabulary)`` logits never
    exist whole (``core_algos.token_logprobs_from_hidden``; Liger's and cut-cross-entropy's idea in plain
    torch): peak memory holds one chunk's logits, not every token's; 0: the full logits. Applies where the
    vocabulary is at least 4x the hidden size (every released LLM; not the tiny demo model, whose logits are
    smaller than its activations). A model whose logits are not its LM head's output (Gemma 2's
    soft-capping, a logit scale) is found on its first pass and keeps the full logits."""
    bf16: str = option("auto", choices=names_in("rewardlab.training.device:BF16_SETTINGS"))
    """Autocast to bf16: ``auto`` (on CUDA with bf16 support), ``true``, ``false``."""
    strategy: str = option("ddp", choices=names_in("rewardlab.training.parallel:STRATEGIES"))
    """Data parallelism under ``torchrun`` (a single process trains the plain model): ``ddp`` keeps a whole
    copy of every model, its gradients and optimiser state on each device; ``fsdp`` shards them over the
    devices (FSDP2 ``fully_shard`` per decoder layer: policy, reference and value model), gathering a layer's
    weights only while it runs. Checkpoints are Hugging Face folders either way."""
    fsdp_mixed_precision: str = option("auto", choices=names_in("rewardlab.training.device:BF16_SETTINGS"))
    """``fsdp``: compute in bf16 (sharded fp32 master weights, bf16 all-gathers, fp32 gradient reduction):
    ``auto`` (on CUDA with bf16 support; off on CPU, where bf16 runs but is slow), ``true``, ``false``."""
    fsdp_cpu_offload: bool = False
    """``fsdp``: keep the sharded parameters, gradients and optimiser state in CPU memory (the optimiser
    step runs on the CPU); saves device memory at the cost of host-device copies every step."""


@dataclass
class RunConfig:
    """Output folder, sample logging, devices (logging, evaluation and checkpoint steps are ``train``'s)."""

    output_dir: str = "runs/rl"
    """Where metrics.jsonl, rollouts.jsonl, checkpoints and plots go."""
    log_completions: int = option(16, ge=0, note="0: off")
    """Completions logged per step to ``OUTPUT/rollouts.jsonl`` (prompt, completion, rewards, advantage, the
    first source's details), taken as whole groups (rounded up to a multiple of ``rollout.n``), the first
    groups of the step's rollout; 0 turns logging off. Follows TRL's ``log_completions``."""
    device: str = "auto"
    """``auto`` (CUDA if present), ``cpu``, ``cuda``."""
    num_threads: int = option(0, ge=0, note="0: torch's default")
    """torch intra-op threads on CPU (0: torch's default)."""


def _report_to(tensorboard: Any) -> dict[str, Any]:
    """The former ``run.tensorboard: true/false`` as ``train.report_to``."""
    return {"train.report_to": "tensorboard" if tensorboard else "none"}


@dataclass
class RLConfig:
    """A whole RL run."""

    model: ModelConfig = field(default_factory=ModelConfig)
    """The policy."""
    data: DataConfig = field(default_factory=DataConfig)
    """Prompts."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Sampling."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """Rewards."""
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    """Advantages and losses."""
    train: TrainConfig = field(default_factory=TrainConfig)
    """Optimisation, logging, evaluation and checkpoint steps."""
    run: RunConfig = field(default_factory=RunConfig)
    """Output folder, sample logging, devices."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Multi-turn episodes with tools (``env.name`` empty: single-turn); docs/envs.md."""
    preset: str | None = None
    """The preset the run started from (informational)."""

    DEPRECATED = {
        "run.save_every": "train.save_steps",
        "run.keep_checkpoints": "train.save_total_limit",
        "run.eval_every": "train.eval_steps",
        "run.log_every": "train.logging_steps",
        "run.tensorboard": Renamed("train.report_to", _report_to),
    }

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_config(
    path: str | Path | None = None, *, preset: str | None = None, overrides: list[str] | None = None
) -> RLConfig:
    """Builds an :class:`RLConfig`: defaults, then ``preset``, then the YAML file, then ``overrides``.

    A YAML file may name its own preset (``preset: dapo``); ``preset=`` wins over it.
    """
    file_values: dict[str, Any] = {}
    if path is not None:
        if not Path(path).exists():
            raise FileNotFoundError(f"config file not found: {path}")
        file_values = read_config_file(path)
    preset = preset or file_values.get("preset")
    layers: list[dict[str, Any]] = []
    if preset:
        if preset not in PRESETS:
            raise ConfigError(f"unknown preset {preset!r} (known: {', '.join(sorted(PRESETS))})")
        layers.append({**PRESETS[preset], "preset": preset})
    layers.append({k: v for k, v in file_values.items() if k != "preset"})
    return validate(load(RLConfig, *layers, overrides=overrides))


def config_from_dict(values: dict[str, Any]) -> RLConfig:
    """An :class:`RLConfig` from a nested dict (e.g. a checkpoint's saved config)."""
    return build(RLConfig, copy.deepcopy(values))


def dump_config(config: RLConfig, path: str | Path | None = None) -> str:
    """The config as YAML (written to ``path`` when given)."""
    return dump(config, path)


def preset_yaml(name: str) -> str:
    """The YAML of a preset (what ``rl/configs/NAME.yaml`` holds)."""
    import yaml

    return yaml.safe_dump({"preset": name, **PRESETS[name]}, sort_keys=False)


def field_docs(cls: type = RLConfig, prefix: str = "") -> list[tuple[str, str, Any]]:
    """``(dotted name, docstring, default)`` of every field of the run config; an option's docstring ends with
    its allowed values (read from the registries) and its bounds, from the field itself."""
    return _field_docs(cls, prefix)


def reference_table() -> str:
    """The Markdown table of every field, its default and meaning (docs/rl.md's configuration reference)."""
    rows = ["| field | default | meaning |", "|---|---|---|"]
    for name, doc, default in field_docs():
        value = json.dumps(default, default=dataclasses.asdict)
        text = doc.replace("``", "`").replace("|", "\\|")
        rows.append(f"| `{name}` | `{value}` | {text} |")
    return "\n".join(rows) + "\n"
