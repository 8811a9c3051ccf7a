"""The RL run configuration: one dataclass tree, loadable from YAML, overridable from the command line.

>>> cfg = load_config(preset="grpo", overrides=["algorithm.kl_coef=0.01", "rollout.n=4"])
>>> cfg.algorithm.kl_coef, cfg.rollout.n
(0.01, 4)

Every field has a docstring and a default. Presets (``grpo``, ``dr_grpo``, ``dapo``, ``rloo``,
``reinforce_pp``, ``ppo``, ``grpo_prm``) set the fields where the papers differ; their YAML copies live in
``rl/configs/``. The precedence is: dataclass defaults < preset < YAML file < ``--set`` overrides.
"""

from __future__ import annotations

import copy
import dataclasses
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
    parse_literal,
    read_config_file,
)
from rewardlab.config import field_docs as _field_docs
from rewardlab.core_algos.estimators import estimator_traits
from rewardlab.envs import ENVS, TOOLS
from rewardlab.envs.config import EnvConfig
from rewardlab.generation import BACKENDS
from rewardlab.rl.presets import PRESETS
from rewardlab.rl.prompt_filter import FILTER_MODES
from rewardlab.training.config import REPORT_TO, BaseTrainingConfig
from rewardlab.training.trackers import missing_package
from rewardlab.verifiers.sources import check_python_path, check_source

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
]


@dataclass
class LoRAConfig:
    """LoRA adapters on the policy (Hu et al., 2021), QLoRA (Dettmers et al., 2023); ``r: 0`` trains every
    weight."""

    r: int = 0
    """Adapter rank; 0 (off) trains every weight. ``16`` is a common choice (``--set model.lora.r=16``)."""
    alpha: int = 32
    """The update is ``alpha / r * B @ A`` (TRL's default 32: twice the common rank 16)."""
    dropout: float = 0.0
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
    dtype: str = "float32"
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
    """A JSONL file or dataset name for ``rewardlab.data.loaders.load_records``, or ``arithmetic`` (the
    generated demo problems)."""
    field_map: dict[str, str] = field(default_factory=dict)
    """Record field -> column name, e.g. ``{"reference": "answer"}``."""
    split: str | None = None
    """Dataset split (for hub-style datasets)."""
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

    roots: int = 0
    """Roots per prompt (m); 0: no tree, ``rollout.n`` independent samples."""
    branches: int = 2
    """Continuations sampled from each branch position (k)."""
    points: int = 1
    """Branch positions per root (t)."""
    branch_at: str = "entropy"
    """Where to branch: ``entropy``, the root's highest-entropy tokens (TreeRL's forking tokens; one forward
    pass over the roots), or ``uniform``, evenly spaced positions."""
    intra_tree_coef: float = 0.0
    """Weight of Tree-GRPO's intra-tree advantage (each sample against its own tree), added to the group's
    advantage; Tree-GRPO uses 1 (their sum). 0: the group's advantage only."""

    @property
    def samples_per_prompt(self) -> int:
        return self.roots * (1 + self.points * self.branches)


@dataclass
class RolloutConfig:
    """Sampling the completions."""

    backend: str = "hf"
    """Rollout engine: ``hf`` is transformers' generate (the CPU default), ``vllm`` an engine colocated with
    training, ``vllm-server`` a separate ``vllm serve`` process (``rewardlab rl serve-vllm``) on other
    devices or nodes, its weights synced every step."""
    n: int = 8
    """Samples per prompt (the group size G). DeepSeekMath uses 64, TRL's default is 8."""
    temperature: float = 1.0
    """Sampling temperature (also divides the trainer's logits, so both see the same policy)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    top_k: int = 0
    """Top-k sampling (0: off)."""
    max_new_tokens: int = 256
    """Most tokens per completion; longer ones are truncated (``finish_reason="length"``)."""
    stop: list[str] = field(default_factory=list)
    """Stop strings."""
    batch_size: int = 64
    """hf backend: most sequences per ``generate`` call (multi-turn: most episodes decoding at once)."""
    interleave_turns: bool = True
    """hf backend, multi-turn episodes: one decoding loop, each episode's next turn starting as soon as the
    environment has answered, its earlier turns kept in the KV cache (vLLM's continuous batching). Off: one
    ``generate`` call per turn, every running episode waiting for the turn's slowest."""
    vllm_gpu_memory_utilization: float = 0.3
    """vllm backend: fraction of device memory for the engine (colocated with training)."""
    vllm_kwargs: dict[str, Any] = field(default_factory=dict)
    """vllm backend: extra ``LLM(...)`` arguments."""
    vllm_sleep_level: int = 0
    """vllm backend: vLLM's sleep mode (CUDA, ROCm, XPU), which frees the engine's memory during each update:
    0 off; 1 parks the weights in host memory and drops the KV cache; 2 drops both (the update refills the
    weights; TRL's ``vllm_enable_sleep_mode``)."""
    vllm_lora: str = "merged"
    """vllm backend, LoRA policy: ``merged`` pushes every weight with the adapters folded in after each
    update; ``adapter`` loads the base once and pushes only the adapter (vLLM's ``enable_lora``), which
    moves less data per step but makes every decoding step compute the adapter's extra matmuls."""
    vllm_server_url: str = "http://127.0.0.1:8000"
    """vllm-server backend: the server's address."""
    vllm_server_sync: str = "disk"
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
    vllm_server_timeout: float = 600.0
    """vllm-server backend: seconds to wait for the server to come up, and for one request."""
    tree: TreeConfig = field(default_factory=TreeConfig)
    """Tree rollouts (off by default)."""
    async_staleness: int = 0
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
    workers: int = 1
    """Scoring worker processes (a warm pool kept for the whole run)."""
    timeout: float = 10.0
    """Per-sample scoring timeout in seconds; a timeout is reward 0 with a counted error."""
    shaping: list[dict[str, Any]] = field(default_factory=list)
    """Shaping transforms from ``rewardlab.rewardmodels.shaping``, applied in order: ``{"name": ..., **kwargs}``."""
    truncation: str = "penalize"
    """Completions cut at ``max_new_tokens``: ``penalize`` replaces their reward by ``truncation_penalty``
    (the default: a cut-off completion is never a clean solve, whatever its text scores), ``mask`` removes
    them from the loss (DAPO overlong filtering), ``none`` keeps their reward (TRL's and verl's default)."""
    truncation_penalty: float = -1.0
    """Reward of a truncated completion under ``truncation: penalize`` (below a wrong answer's 0 for 0/1
    rewards, so the policy learns to finish its answer)."""
    overlong_buffer: int = 0
    """DAPO soft overlong punishment: length of the buffer before ``max_new_tokens`` (0: off)."""
    overlong_penalty_factor: float = 1.0
    """DAPO soft overlong punishment: its scale."""
    process: str | None = None
    """Per-step (process) reward scorer: ``prm:PATH`` (a trained ``ProcessRewardModel``),
    ``correct_looking`` (the reward-hacking testbed's scripted scorer) or ``py:module:Class``; ``None``: off."""
    process_kwargs: dict[str, Any] = field(default_factory=dict)
    """Constructor / ``from_pretrained`` arguments of the process scorer."""
    step_shaping: str = "clip+delta"
    """How step scores become rewards (Gao et al., 2024's Clip and Delta, or ``none``)."""
    step_eta: float = 0.0
    """Gao et al.'s eta: the threshold of Clip (``min(r - eta, 0)``)."""
    success_weight: float = 1.0
    """Weight of the outcome (verifier) reward on the last token when process rewards are on."""
    step_weight: float = 1.0
    """Weight of the shaped step rewards on their step-end tokens."""
    length_budget: str = "none"
    """L1 length control (Aggarwal & Welleck, 2025): each prompt asks for a token budget ("Think for N
    tokens.") drawn from [``length_budget_min``, ``length_budget_max``], and the reward becomes ``exact``:
    ``1[correct] - alpha |N - n|`` or ``max``: ``1[correct] clip(alpha (N - n) + delta, 0, 1)``; ``none``:
    off."""
    length_budget_alpha: float | None = None
    """L1's alpha; ``None``: the paper's (0.0003 for ``exact``, 0.001 for ``max``)."""
    length_budget_delta: float = 0.5
    """L1-Max's delta (the reward of a correct answer exactly at its budget)."""
    length_budget_min: int = 100
    """Smallest budget drawn (L1: 100 tokens)."""
    length_budget_max: int = 4000
    """Largest budget drawn at the start of training (L1: 4000 tokens)."""
    length_budget_final_max: int = 0
    """Shrinking-budget curriculum (long2short): the largest budget falls linearly from
    ``length_budget_max`` to this over ``train.max_steps``; 0: no curriculum (L1's fixed range). Evaluation asks
    for the current largest budget."""


@dataclass
class AlgorithmConfig:
    """Advantages, policy loss, KL, filtering."""

    adv_estimator: str = "grpo"
    """Advantage estimator (``gae`` is PPO's; ``step_return`` uses process rewards)."""
    adv_eps: float = 1e-6
    """GRPO: epsilon added to the group std."""
    adv_scale: str = "group"
    """GRPO: ``group`` std, ``batch`` std or ``none`` (Dr.GRPO); ``step_return``: ``group`` or ``none``."""
    step_baseline: str = "rloo"
    """``step_return`` (process rewards): baseline of the trajectories' total returns, ``rloo``, ``mean``,
    ``none``."""
    policy_loss: str = "ppo"
    """Policy loss: ``ppo`` is the clipped surrogate with a token ratio, ``gspo`` uses the sequence ratio,
    ``cispo`` clips the importance weight instead of the update; ``clip_cov`` and ``kl_cov`` (Cui et al.,
    2025) hold back the few tokens whose log-probability and advantage covary most (entropy collapse)."""
    clip_ratio_low: float = 0.2
    """Lower clip epsilon of the ratio."""
    clip_ratio_high: float = 0.2
    """Upper clip epsilon (DAPO clip-higher: 0.28)."""
    clip_ratio_c: float | None = None
    """Dual-clip constant c > 1 (e.g. 3.0); ``None``: off."""
    clip_cov_ratio: float = 2e-4
    """``clip_cov``: share of the micro-batch's tokens whose gradient is cut (Cui et al., 2025: 2e-4; verl's
    default)."""
    clip_cov_lb: float = 1.0
    """``clip_cov``: a token is a candidate when its covariance lies above this bound (paper: 1)."""
    clip_cov_ub: float = 5.0
    """``clip_cov``: ... and below this one (paper: 5)."""
    kl_cov_ratio: float = 2e-4
    """``kl_cov``: share of the micro-batch's tokens with the highest covariance that get the KL penalty
    (verl's default and the paper's 32B setting; its 7B runs use 2e-3)."""
    ppo_kl_coef: float = 1.0
    """``kl_cov``: coefficient of the ``|log pi - log pi_old|`` penalty on those tokens (the paper's beta = 1;
    verl's function default, its YAML has 0.1)."""
    top_entropy_quantile: float = 1.0
    """Train only on the highest-entropy tokens (Wang et al., 2025, "Beyond the 80/20 Rule": 0.2): the policy
    loss of a token below the micro-batch's ``1 - q`` entropy quantile is zeroed, the normaliser still counts
    it (TRL's ``top_entropy_quantile``). 1.0: every token."""
    loss_agg_mode: str = "seq-mean-token-mean"
    """How token losses become one number: ``seq-mean-token-mean`` is the GRPO paper's,
    ``seq-mean-token-sum-norm`` Dr.GRPO's constant normaliser, ``token-mean`` DAPO's."""
    kl_coef: float = 0.0
    """KL coefficient beta (the initial one under ``kl_ctrl: adaptive``); 0 loads no reference model."""
    kl_ctrl: str = "fixed"
    """``fixed`` keeps ``kl_coef``; ``adaptive`` drives the measured per-token KL toward ``kl_target``
    (Ziegler et al., 2019; verl's ``kl_ctrl.type``)."""
    kl_target: float = 0.1
    """``kl_ctrl: adaptive``: the target per-token KL (verl's ``target_kl``)."""
    kl_horizon: int = 10000
    """``kl_ctrl: adaptive``: the horizon, in samples, over which the error is corrected."""
    kl_estimator: str = "k3"
    """KL estimator (Schulman, 2020): ``k1`` is ``log r``, ``k2`` half its square, ``k3`` the unbiased
    low-variance one."""
    use_kl_in_reward: bool = False
    """Put the KL in the token rewards (REINFORCE++, RLOO, PPO-RLHF) instead of the loss (GRPO)."""
    entropy_coef: float = 0.0
    """Entropy bonus coefficient (subtracted from the loss)."""
    gamma: float = 1.0
    """Discount (REINFORCE++ returns, GAE)."""
    lam: float = 1.0
    """GAE lambda."""
    vf_coef: float = 0.5
    """PPO: value loss weight."""
    cliprange_value: float | None = 0.2
    """PPO: value clipping range; ``None``: off."""
    dynamic_sampling: bool = False
    """DAPO: drop groups whose rewards all agree and refill the batch."""
    max_refill_rounds: int = 3
    """DAPO: most extra generation rounds to refill a batch."""
    recompute_old_logprobs: bool = True
    """Recompute pi_old with the trainer (default); ``False`` trusts the rollout's log-probs."""
    rollout_is: str = "none"
    """Rollout/trainer mismatch correction: truncated importance sampling per ``token`` or per
    ``sequence``, or ``none``."""
    rollout_is_cap: float = 2.0
    """The cap C of truncated IS weights."""
    rollout_is_mask: bool = False
    """Remove samples whose sequence ratio leaves [1/C, C] from the loss."""
    prompt_filter: str = "none"
    """Pre-rollout prompt selection from each prompt's earlier groups (``rl/prompt_filter.py``): ``band``
    keeps prompts whose last pass rate lies in [``prompt_filter_low``, ``prompt_filter_high``] (Bae et al.,
    2025, online difficulty filtering); ``greso`` skips prompts after runs of zero-variance groups with a
    self-adjusting probability (Zheng et al., 2025, GRESO); ``none``: off. Prompts never seen are always
    kept; pays off when training runs several epochs over its prompts."""
    prompt_filter_low: float = 0.2
    """``band``: the lowest pass rate kept (0.2, Bae et al.'s balanced band as its write-ups give it)."""
    prompt_filter_high: float = 0.8
    """``band``: the highest pass rate kept."""
    prompt_filter_window: int = 1
    """``band``: the pass rate is the mean of the prompt's last this many groups."""
    greso_p_easy: float = 0.5
    """``greso``: the initial exploration probability of prompts whose groups were all right (GRESO's
    scripts: 0.5); a prompt with z such groups in a row is rolled out with probability ``p**z``."""
    greso_p_hard: float = 0.5
    """``greso``: the same for prompts whose groups were all wrong (0.5)."""
    greso_target_zero_var: float = 0.25
    """``greso``: the share of zero-variance groups the probabilities are adjusted toward (0.25, a third
    easy and two thirds hard, by 0.01 a step)."""
    prompt_filter_max_draws: int = 4
    """Most candidates drawn per step, as a multiple of ``train.prompts_per_step``; when the filter rejects
    more, the batch is filled with the rejected candidates taken last (a step never trains on fewer)."""
    passk_k: int = 4
    """``passk`` estimator (Chen et al., 2025, Pass@k Training): the k whose pass@k the advantages optimise;
    at most ``rollout.n``; set it to the k you evaluate pass@k at."""
    positive_adv_weight: float = 1.0
    """Positive sample reinforcement weight (Zhu et al., 2025, "The Surprising Effectiveness of Negative
    Reinforcement"): multiplies advantages > 0. Their W-REINFORCE uses 0.1; 0 trains on negative samples
    only (NSR)."""
    negative_adv_weight: float = 1.0
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

    max_steps: int = 100
    """Training steps (rollout + update rounds)."""
    per_device_train_batch_size: int = 16
    """Samples per forward/backward on each device (gradient accumulation inside a minibatch)."""
    learning_rate: float = 1e-6
    """Peak learning rate (AdamW)."""
    lr_scheduler_type: str = "constant"
    """Learning-rate decay after warm-up."""
    warmup_steps: int = 0
    """Linear warm-up (in optimiser steps)."""
    seed: int = 0
    """Seeds sampling, data order and everything else."""
    save_steps: int = 0
    """Checkpoint every N steps (0: only at the end)."""
    save_total_limit: int | None = 2
    """How many step checkpoints to keep (0 or ``None``: all)."""
    eval_steps: int = 0
    """Greedy pass@1 on the eval set every N steps (0: only before and after)."""
    logging_steps: int = 1
    """Console line every N steps (JSONL gets every step)."""
    prompts_per_step: int = 8
    """Prompts per step (the batch is ``prompts_per_step * rollout.n`` samples)."""
    epochs: int = 1
    """Optimisation epochs over each rollout batch (PPO's K; GRPO's mu)."""
    minibatches: int = 1
    """Optimiser steps per epoch (the rollout batch is split into this many minibatches)."""
    micro_batch_tokens: int = 0
    """With ``padding_free``: micro-batches of about this many tokens (prompt + response) each instead of
    ``per_device_train_batch_size`` samples, longest sequences first into the least-loaded one (verl's
    ``use_dynamic_bsz`` / ``ppo_max_token_len_per_gpu``); 0: off. Under DDP/FSDP every rank runs as many
    micro-batches as the rank that needs the most."""
    value_lr: float = 1e-5
    """PPO: value model learning rate."""
    skip_zero_advantage: bool = True
    """Skip the forward/backward of samples whose advantage is 0 on every token (all-equal groups) when the
    loss has no KL / entropy term: the gradient is unchanged (normalisers still count them), the time is not."""
    padding_free: bool = False
    """Pack each micro-batch's sequences into one row with no pad tokens (position ids restart per sequence;
    block-diagonal causal attention, flash-attention's varlen kernel when used) for every policy, reference
    and value forward pass; the same log-probs and gradients as padded rows."""
    logprob_chunk_tokens: int = 512
    """Read log-probs, entropies and self-certainty from the last hidden states, the LM head applied to this
    many tokens at a time and recomputed in the backward, so that the ``(tokens, vocabulary)`` logits never
    exist whole (``core_algos.token_logprobs_from_hidden``; Liger's and cut-cross-entropy's idea in plain
    torch): peak memory holds one chunk's logits, not every token's; 0: the full logits. Applies where the
    vocabulary is at least 4x the hidden size (every released LLM; not the tiny demo model, whose logits are
    smaller than its activations). A model whose logits are not its LM head's output (Gemma 2's
    soft-capping, a logit scale) is found on its first pass and keeps the full logits."""
    bf16: str = "auto"
    """Autocast to bf16: ``auto`` (on CUDA with bf16 support), ``true``, ``false``."""
    strategy: str = "ddp"
    """Data parallelism under ``torchrun`` (a single process trains the plain model): ``ddp`` keeps a whole
    copy of every model, its gradients and optimiser state on each device; ``fsdp`` shards them over the
    devices (FSDP2 ``fully_shard`` per decoder layer: policy, reference and value model), gathering a layer's
    weights only while it runs. Checkpoints are Hugging Face folders either way."""
    fsdp_mixed_precision: str = "auto"
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
    log_completions: int = 16
    """Completions logged per step to ``OUTPUT/rollouts.jsonl`` (prompt, completion, rewards, advantage, the
    first source's details), taken as whole groups (rounded up to a multiple of ``rollout.n``), the first
    groups of the step's rollout; 0 turns logging off. Follows TRL's ``log_completions``."""
    device: str = "auto"
    """``auto`` (CUDA if present), ``cpu``, ``cuda``."""
    num_threads: int = 0
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
    """``(dotted name, docstring, default)`` of every field of the run config; a field with a fixed set of
    values lists them, read from the registries (so the documentation cannot fall behind the code)."""
    allowed = choices()
    return [
        (name, doc + _allowed_values_doc(allowed.get(name)), default)
        for name, doc, default in _field_docs(cls, prefix)
    ]


# ----------------------------------------------------------------------------------------------------------
# Validation: every name and number a run would refuse later is refused when the config loads, in one line,
# before any model is loaded.
# ----------------------------------------------------------------------------------------------------------
def choices() -> dict[str, list[Any]]:
    """Dotted field -> its allowed values, read from the registries and modules that implement them."""
    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab import core_algos as ca
    from rewardlab.generation.vllm import LORA_MODES, SLEEP_LEVELS

    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.generation.vllm_server import SYNC_MODES

    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.rewardmodels.shaping import STEP_SHAPINGS

    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.rewardmodels.shaping.functional import LENGTH_BUDGET_MODES, TRUNCATION_MODES

    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.training.device import BF16_SETTINGS, DTYPES

    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.training.optim import SCHEDULES

    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.training.parallel import STRATEGIES

    return {
        "model.dtype": ["auto", *DTYPES],
        "rollout.backend": BACKENDS.names(),
        "reward.truncation": list(TRUNCATION_MODES),
        "reward.step_shaping": list(STEP_SHAPINGS),
        "reward.length_budget": ["none", *LENGTH_BUDGET_MODES],
        "algorithm.adv_estimator": ca.ADVANTAGE_ESTIMATORS.names(),
        "algorithm.adv_scale": list(ca.ADV_SCALES),
        "algorithm.step_baseline": list(ca.STEP_BASELINES),
        "rollout.tree.branch_at": list(ca.BRANCH_RULES),
        "algorithm.policy_loss": ca.POLICY_LOSSES.names(),
        "algorithm.loss_agg_mode": ca.LOSS_AGG_MODES.names(),
        "algorithm.kl_ctrl": list(ca.KL_CONTROLLERS),
        "algorithm.kl_estimator": ca.KL_ESTIMATORS.names(),
        "algorithm.rollout_is": ["none", *ca.IS_LEVELS],
        "algorithm.prompt_filter": list(FILTER_MODES),
        "train.lr_scheduler_type": list(SCHEDULES),
        "train.report_to": list(REPORT_TO),
        "train.bf16": list(BF16_SETTINGS),
        "train.strategy": list(STRATEGIES),
        "train.fsdp_mixed_precision": list(BF16_SETTINGS),
        "rollout.vllm_sleep_level": list(SLEEP_LEVELS),
        "rollout.vllm_lora": list(LORA_MODES),
        "rollout.vllm_server_sync": list(SYNC_MODES),
    }


# (field, test, what it must be): numbers outside these ranges end a run later, or train on nothing.
_RANGES: list[tuple[str, Any, str]] = [
    ("model.lora.r", lambda v: v >= 0, ">= 0 (0: off)"),
    ("model.lora.alpha", lambda v: v > 0, "> 0"),
    ("model.lora.dropout", lambda v: 0 <= v < 1, "in [0, 1)"),
    ("rollout.n", lambda v: v >= 1, "at least 1"),
    ("rollout.temperature", lambda v: v >= 0, ">= 0 (0: greedy)"),
    ("rollout.top_p", lambda v: 0 < v <= 1, "in (0, 1]"),
    ("rollout.top_k", lambda v: v >= 0, ">= 0 (0: off)"),
    ("rollout.max_new_tokens", lambda v: v >= 1, "at least 1"),
    ("rollout.batch_size", lambda v: v >= 1, "at least 1"),
    ("rollout.tree.roots", lambda v: v >= 0, ">= 0 (0: off)"),
    ("rollout.tree.branches", lambda v: v >= 1, "at least 1"),
    ("rollout.tree.points", lambda v: v >= 1, "at least 1"),
    ("rollout.tree.intra_tree_coef", lambda v: v >= 0, ">= 0 (0: off)"),
    ("rollout.vllm_server_timeout", lambda v: 0 < v < float("inf"), "a positive number of seconds"),
    ("reward.workers", lambda v: v >= 0, ">= 0 (0: score in this process)"),
    ("reward.timeout", lambda v: 0 < v < float("inf"), "a positive number of seconds"),
    ("reward.overlong_buffer", lambda v: v >= 0, ">= 0 (0: off)"),
    ("reward.length_budget_alpha", lambda v: v is None or 0 < v < float("inf"), "> 0, or null (the paper's)"),
    ("reward.length_budget_delta", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("reward.length_budget_min", lambda v: v >= 1, "at least 1"),
    ("reward.length_budget_final_max", lambda v: v >= 0, ">= 0 (0: no curriculum)"),
    ("algorithm.adv_eps", lambda v: v > 0, "> 0"),
    ("algorithm.clip_ratio_low", lambda v: v >= 0, ">= 0"),
    ("algorithm.clip_ratio_high", lambda v: v >= 0, ">= 0"),
    ("algorithm.clip_ratio_c", lambda v: v is None or v > 1, "> 1, or null (off)"),
    ("algorithm.clip_cov_ratio", lambda v: 0 < v <= 1, "in (0, 1]"),
    ("algorithm.kl_cov_ratio", lambda v: 0 < v <= 1, "in (0, 1]"),
    ("algorithm.ppo_kl_coef", lambda v: v >= 0, ">= 0"),
    ("algorithm.top_entropy_quantile", lambda v: 0 < v <= 1, "in (0, 1] (1: every token)"),
    ("algorithm.kl_coef", lambda v: v >= 0, ">= 0"),
    ("algorithm.kl_target", lambda v: v > 0, "> 0"),
    ("algorithm.kl_horizon", lambda v: v >= 1, "at least 1"),
    ("algorithm.entropy_coef", lambda v: v >= 0, ">= 0"),
    ("algorithm.gamma", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("algorithm.lam", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("algorithm.vf_coef", lambda v: v >= 0, ">= 0"),
    ("algorithm.max_refill_rounds", lambda v: v >= 0, ">= 0"),
    ("algorithm.rollout_is_cap", lambda v: v > 1, "> 1"),
    ("algorithm.passk_k", lambda v: v >= 1, "at least 1"),
    ("algorithm.prompt_filter_low", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("algorithm.prompt_filter_high", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("algorithm.prompt_filter_window", lambda v: v >= 1, "at least 1"),
    ("algorithm.greso_p_easy", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("algorithm.greso_p_hard", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("algorithm.greso_target_zero_var", lambda v: 0 <= v <= 1, "in [0, 1]"),
    ("algorithm.prompt_filter_max_draws", lambda v: v >= 1, "at least 1"),
    ("algorithm.positive_adv_weight", lambda v: 0 <= v < float("inf"), ">= 0"),
    ("algorithm.negative_adv_weight", lambda v: 0 <= v < float("inf"), ">= 0"),
    ("rollout.async_staleness", lambda v: 0 <= v <= 8, "in [0, 8] (0: synchronous)"),
    ("train.max_steps", lambda v: v >= 0, ">= 0"),
    ("train.prompts_per_step", lambda v: v >= 1, "at least 1"),
    ("train.epochs", lambda v: v >= 1, "at least 1"),
    ("train.minibatches", lambda v: v >= 1, "at least 1"),
    ("train.per_device_train_batch_size", lambda v: v >= 1, "at least 1"),
    ("train.micro_batch_tokens", lambda v: v >= 0, ">= 0 (0: off)"),
    ("train.logprob_chunk_tokens", lambda v: v >= 0, ">= 0 (0: the full logits)"),
    ("train.learning_rate", lambda v: v > 0, "> 0"),
    ("train.value_lr", lambda v: v > 0, "> 0"),
    ("train.weight_decay", lambda v: v >= 0, ">= 0"),
    ("train.warmup_steps", lambda v: v >= 0, ">= 0"),
    ("train.max_grad_norm", lambda v: v > 0, "> 0"),
    ("train.save_steps", lambda v: v >= 0, ">= 0 (0: only at the end)"),
    ("train.save_total_limit", lambda v: v is None or v >= 0, ">= 0 (0 or null: all)"),
    ("train.eval_steps", lambda v: v >= 0, ">= 0 (0: before and after)"),
    ("train.logging_steps", lambda v: v >= 1, "at least 1"),
    ("run.log_completions", lambda v: v >= 0, ">= 0 (0: off)"),
    ("run.num_threads", lambda v: v >= 0, ">= 0 (0: torch's default)"),
]


def _get(cfg: RLConfig, dotted: str) -> Any:
    value: Any = cfg
    for part in dotted.split("."):
        value = getattr(value, part)
    return value


def _check_sources(cfg: RLConfig) -> None:
    for i, src in enumerate(cfg.reward.sources):
        check_source(src.name, src.kwargs, f"reward.sources[{i}]")  # the kind's own check
        if src.weight != src.weight or abs(src.weight) == float("inf"):
            raise ConfigError(f"reward.sources[{i}].weight must be a finite number, got {src.weight}")


def _check_process(cfg: RLConfig) -> None:
    spec = cfg.reward.process
    if spec is None or spec == "correct_looking" or (spec.startswith("prm:") and spec[4:]):
        return
    if spec.startswith("py:"):
        check_python_path(spec[3:], "reward.process")
        return
    raise ConfigError(
        f"reward.process: unknown process scorer {spec!r} (prm:PATH, correct_looking, py:module:Class)"
    )


def _check_shaping(cfg: RLConfig) -> None:
    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.rewardmodels.shaping import build_pipeline, conflicts_with_estimator

    try:
        build_pipeline(cfg.reward.shaping)
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"reward.shaping: {str(exc).splitlines()[0]}") from None
    conflict = conflicts_with_estimator(cfg.reward.shaping, cfg.algorithm.adv_estimator)
    if conflict:
        raise ConfigError(f"reward.shaping: {conflict}")


def validate(cfg: RLConfig) -> RLConfig:
    """Raises :class:`ConfigError` (one line) for the first value a run would refuse or choke on later:
    a name that no registry has, a number out of range, a reward or process spec that cannot load."""
    for dotted, allowed in choices().items():
        value = _get(cfg, dotted)
        for one in value if isinstance(value, list) else [value]:  # a list (train.report_to): each value
            if one not in allowed:
                raise ConfigError(f"{dotted}: unknown value {one!r} (known: {', '.join(map(str, allowed))})")
    problem = missing_package(cfg.train.report_to)
    if problem:  # now, not after the model has loaded
        raise ConfigError(f"train.{problem}")
    for dotted, ok, must in _RANGES:
        value = _get(cfg, dotted)
        if not ok(value):
            raise ConfigError(f"{dotted} must be {must}, got {value!r}")
    try:
        import torch

        torch.device(cfg.run.device if cfg.run.device != "auto" else "cpu")
    except RuntimeError:
        raise ConfigError(
            f"run.device: {cfg.run.device!r} is not a device (auto, cpu, cuda, cuda:N)"
        ) from None
    _check_combinations(cfg)
    _check_vllm_modes(cfg)
    _check_sources(cfg)
    _check_process(cfg)
    _check_shaping(cfg)
    _check_lora(cfg)
    _check_strategy(cfg)
    _check_env(cfg)
    return cfg


def _check_env(cfg: RLConfig) -> None:
    """The environment's settings, names and tools resolve; process rewards (step segmentation of one
    completion) are not defined over an episode's turns and observations."""

    ec = cfg.env
    if not ec.enabled:
        return
    try:
        ec.check()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if ":" not in ec.name and ec.name not in ENVS:
        raise ConfigError(
            f"env.name: unknown environment {ec.name!r} (known: {', '.join(ENVS.names())}, or module:Class)"
        )
    unknown = [t for t in ec.tools if ":" not in t and t not in TOOLS]
    if ec.name == "tools" and unknown:
        raise ConfigError(
            f"env.tools: unknown {unknown} (known: {', '.join(TOOLS.names())}, or module:function)"
        )
    if cfg.reward.process:
        raise ConfigError(
            "reward.process: process rewards are not supported with multi-turn environments (env.name)"
        )


def _check_lora(cfg: RLConfig) -> None:
    """LoRA needs peft; QLoRA needs an adapter, CUDA and bitsandbytes, and no PPO critic (a trainable copy
    of a 4-bit body)."""
    import importlib.util

    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.training.lora import qlora_unavailable

    lc = cfg.model.lora
    targets = [lc.target_modules] if isinstance(lc.target_modules, str) else lc.target_modules
    if not targets or not all(isinstance(t, str) and t for t in targets):
        raise ConfigError(
            f"model.lora.target_modules must be all-linear or a list of module names, got {lc.target_modules!r}"
        )
    if lc.enabled and importlib.util.find_spec("peft") is None:
        raise ConfigError("model.lora.r: LoRA needs peft (pip install 'rewardlab[lora]')")
    if not lc.load_in_4bit:
        return
    if not lc.enabled:
        raise ConfigError("model.lora.load_in_4bit (QLoRA) needs adapters: set model.lora.r > 0")
    why = "needs a CUDA device, not run.device=cpu" if cfg.run.device == "cpu" else qlora_unavailable()
    if why:
        raise ConfigError(f"model.lora.load_in_4bit: QLoRA {why}")
    if estimator_traits(cfg.algorithm.adv_estimator).needs_critic:
        raise ConfigError(
            "model.lora.load_in_4bit: PPO's critic is a trainable copy of the policy's body, which a 4-bit "
            "body cannot give (use LoRA without load_in_4bit)"
        )


def _check_strategy(cfg: RLConfig) -> None:
    """The FSDP options need ``train.strategy: fsdp``; FSDP is not combined with LoRA (whose small adapters
    DDP replicates cheaply)."""
    tc = cfg.train
    if tc.strategy == "fsdp" and cfg.model.lora.enabled:
        raise ConfigError("train.strategy: fsdp is not supported with LoRA (model.lora.r > 0): use ddp")
    if tc.strategy == "fsdp":
        return
    if tc.fsdp_cpu_offload:
        raise ConfigError("train.fsdp_cpu_offload needs train.strategy: fsdp (ddp keeps whole copies)")
    if tc.fsdp_mixed_precision == "true":
        raise ConfigError("train.fsdp_mixed_precision needs train.strategy: fsdp (for ddp use train.bf16)")


def _check_vllm_modes(cfg: RLConfig) -> None:
    """Sleep mode and the LoRA adapter path belong to the colocated engine, and do not mix at level 2."""
    rc = cfg.rollout
    if rc.vllm_sleep_level and rc.backend != "vllm":
        raise ConfigError(f"rollout.vllm_sleep_level is for the colocated vllm backend, not {rc.backend}")
    if rc.vllm_lora != "adapter":
        return
    if rc.backend != "vllm" or not cfg.model.lora.enabled:
        raise ConfigError(
            "rollout.vllm_lora: adapter needs rollout.backend: vllm and a LoRA policy (model.lora.r > 0)"
        )
    if rc.vllm_sleep_level == 2:
        raise ConfigError(
            "rollout.vllm_lora: adapter never re-pushes the base weights that sleep level 2 drops"
        )


def _check_combinations(cfg: RLConfig) -> None:
    ac, rw = cfg.algorithm, cfg.reward
    if cfg.train.micro_batch_tokens and not cfg.train.padding_free:
        raise ConfigError(
            "train.micro_batch_tokens needs train.padding_free: padded rows keep the whole batch's padding"
        )
    if ac.adv_estimator == "step_return" and ac.adv_scale == "batch":
        raise ConfigError(
            "algorithm.adv_scale: step_return scales by the group's std or not at all (group, none)"
        )
    if ac.kl_ctrl == "adaptive" and ac.kl_coef <= 0:
        raise ConfigError("algorithm.kl_ctrl: adaptive needs an initial algorithm.kl_coef > 0")
    if rw.length_budget != "none":
        low, high, final = rw.length_budget_min, rw.length_budget_max, rw.length_budget_final_max
        if high < low or (final and final < low):
            raise ConfigError(
                f"reward.length_budget_max ({high}) and length_budget_final_max ({final}, 0: off) must not be "
                f"below length_budget_min ({low})"
            )
    if ac.prompt_filter_low > ac.prompt_filter_high:
        raise ConfigError(
            f"algorithm.prompt_filter_low ({ac.prompt_filter_low}) must not exceed prompt_filter_high "
            f"({ac.prompt_filter_high})"
        )
    if ac.adv_estimator == "passk" and ac.passk_k > cfg.rollout.n:
        raise ConfigError(f"algorithm.passk_k ({ac.passk_k}) must not exceed rollout.n ({cfg.rollout.n})")
    _check_async(cfg)
    _check_tree(cfg)
    if rw.overlong_buffer > cfg.rollout.max_new_tokens:
        raise ConfigError(
            f"reward.overlong_buffer ({rw.overlong_buffer}) must not exceed rollout.max_new_tokens "
            f"({cfg.rollout.max_new_tokens})"
        )


def _check_tree(cfg: RLConfig) -> None:
    tree = cfg.rollout.tree
    if not tree.roots:
        return
    if cfg.rollout.n != tree.samples_per_prompt:
        raise ConfigError(
            f"rollout.n must be the tree's samples per prompt, roots * (1 + points * branches) = "
            f"{tree.samples_per_prompt}, got {cfg.rollout.n}"
        )
    if cfg.env.name:
        raise ConfigError("rollout.tree: tree rollouts branch single completions, not environment episodes")


def _check_async(cfg: RLConfig) -> None:
    """Asynchronous rollouts generate with a copy of the policy in a thread of this process: the ``hf``
    backend on one process, first-round batches only."""
    if not cfg.rollout.async_staleness:
        return
    if cfg.rollout.backend != "hf":
        raise ConfigError(
            "rollout.async_staleness: asynchronous rollouts run the hf backend on a copy of the policy "
            f"(rollout.backend is {cfg.rollout.backend!r})"
        )
    if cfg.algorithm.dynamic_sampling:
        raise ConfigError(
            "rollout.async_staleness: dynamic sampling refills a batch from the current policy; "
            "turn one of them off"
        )
    if cfg.env.enabled:
        raise ConfigError("rollout.async_staleness: multi-turn environments (env.name) run synchronously")


def _allowed_values_doc(allowed: list[str] | None) -> str:
    """`` One of: ``a``, ``b``.`` for a field with a fixed set of values (empty otherwise)."""
    return f" One of: {', '.join(f'``{v}``' for v in allowed)}." if allowed else ""


def reference_table() -> str:
    """The Markdown table of every field, its default and meaning (docs/rl.md's configuration reference)."""
    import json

    rows = ["| field | default | meaning |", "|---|---|---|"]
    for name, doc, default in field_docs():
        value = json.dumps(default, default=dataclasses.asdict)
        text = doc.replace("``", "`").replace("|", "\\|")
        rows.append(f"| `{name}` | `{value}` | {text} |")
    return "\n".join(rows) + "\n"
