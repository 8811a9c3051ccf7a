"""The RL config's checks at load: every value a run would refuse or choke on later is refused in one line,
before any model is loaded.

A single field's bounds and allowed values sit on the field (:func:`rewardlab.config.option`, checked by
:func:`rewardlab.config.check_fields`); this module holds what one field cannot say: names that must
resolve (reward sources, process scorers, shaping, environments, the device, a tracker's package) and the
combinations of several fields, one small function each, run in order by :func:`validate`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rewardlab.config import ConfigError, check_fields
from rewardlab.envs import ENVS, TOOLS
from rewardlab.extras import MissingExtraError, require_installed
from rewardlab.rl.sources import check_source
from rewardlab.training.trackers import missing_package
from rewardlab.verifiers.python import check_python_path

if TYPE_CHECKING:
    from rewardlab.rl.config import RLConfig

__all__ = ["CHECKS", "is_implicit_prm", "validate"]


def validate(cfg: RLConfig) -> RLConfig:
    """Raises :class:`ConfigError` (one line) for the first value a run would refuse or choke on later:
    a name that no registry has, a number out of range, a reward or process spec that cannot load, a
    combination of fields the trainer cannot run."""
    check_fields(cfg)
    for check in CHECKS:
        check(cfg)
    return cfg


def _check_tracker_packages(cfg: RLConfig) -> None:
    problem = missing_package(cfg.train.report_to)
    if problem:  # now, not after the model has loaded
        raise ConfigError(f"train.{problem}")


def _check_device(cfg: RLConfig) -> None:
    import torch  # lazy: torch (this module loads for `rewardlab --help`, which imports no torch)

    try:
        torch.device(cfg.run.device if cfg.run.device != "auto" else "cpu")
    except RuntimeError:
        raise ConfigError(
            f"run.device: {cfg.run.device!r} is not a device (auto, cpu, cuda, cuda:N)"
        ) from None


def _check_micro_batches(cfg: RLConfig) -> None:
    if cfg.train.micro_batch_tokens and not cfg.train.padding_free:
        raise ConfigError(
            "train.micro_batch_tokens needs train.padding_free: padded rows keep the whole batch's padding"
        )


def _check_advantages(cfg: RLConfig) -> None:
    """The estimator's scale, the adaptive KL's start and pass@k's k against the group size."""
    ac = cfg.algorithm
    if ac.adv_estimator == "step_return" and ac.adv_scale == "batch":
        raise ConfigError(
            "algorithm.adv_scale: step_return scales by the group's std or not at all (group, none)"
        )
    if ac.kl_ctrl == "adaptive" and ac.kl_coef <= 0:
        raise ConfigError("algorithm.kl_ctrl: adaptive needs an initial algorithm.kl_coef > 0")
    if ac.adv_estimator == "passk" and ac.passk_k > cfg.rollout.n:
        raise ConfigError(f"algorithm.passk_k ({ac.passk_k}) must not exceed rollout.n ({cfg.rollout.n})")


def _check_length_budget(cfg: RLConfig) -> None:
    rw = cfg.reward
    if rw.length_budget == "none":
        return
    low, high, final = rw.length_budget_min, rw.length_budget_max, rw.length_budget_final_max
    if high < low or (final and final < low):
        raise ConfigError(
            f"reward.length_budget_max ({high}) and length_budget_final_max ({final}, 0: off) must not be "
            f"below length_budget_min ({low})"
        )


def _check_prompt_filter(cfg: RLConfig) -> None:
    pf = cfg.algorithm.prompt_filter
    if pf.low > pf.high:
        raise ConfigError(
            f"algorithm.prompt_filter.low ({pf.low}) must not exceed prompt_filter.high ({pf.high})"
        )


def _check_curriculum(cfg: RLConfig) -> None:
    """A rollout from a prefix or with a hint is a single completion; the hint shares lie in (0, 1)."""
    cc = cfg.algorithm.curriculum
    if cc.name in ("reverse", "guided_hints") and cfg.env.enabled:
        raise ConfigError(
            f"algorithm.curriculum.name={cc.name}: prefixes and hints are for single completions, not "
            "multi-turn environments (env.name)"
        )
    if not cc.hint_fractions or any(not 0 < f < 1 for f in cc.hint_fractions):
        raise ConfigError(
            f"algorithm.curriculum.hint_fractions must be shares in (0, 1), got {list(cc.hint_fractions)}"
        )


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


def _check_overlong(cfg: RLConfig) -> None:
    buffer, longest = cfg.reward.overlong_buffer, cfg.rollout.max_new_tokens
    if buffer > longest:
        raise ConfigError(
            f"reward.overlong_buffer ({buffer}) must not exceed rollout.max_new_tokens ({longest})"
        )


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


def _check_sources(cfg: RLConfig) -> None:
    for i, src in enumerate(cfg.reward.sources):
        check_source(src.name, src.kwargs, f"reward.sources[{i}]")  # the kind's own check
        if src.weight != src.weight or abs(src.weight) == float("inf"):
            raise ConfigError(f"reward.sources[{i}].weight must be a finite number, got {src.weight}")


def _check_process(cfg: RLConfig) -> None:
    spec = cfg.reward.process
    if spec is None or spec == "correct_looking" or (spec.startswith("prm:") and spec[4:]):
        return
    if is_implicit_prm(spec) and spec != "implicit_prm:":
        return
    if spec.startswith("py:"):
        check_python_path(spec[3:], "reward.process")
        return
    raise ConfigError(
        f"reward.process: unknown process scorer {spec!r} (prm:PATH, implicit_prm[:PATH], correct_looking, "
        "py:module:Class)"
    )


def is_implicit_prm(spec: str | None) -> bool:
    """``reward.process`` names PRIME's implicit PRM (``implicit_prm`` or ``implicit_prm:PATH``)."""
    return spec is not None and (spec == "implicit_prm" or spec.startswith("implicit_prm:"))


def _reads_process_rewards(estimator: str) -> bool:
    """The estimator takes token-level process rewards apart from the outcome (its ``needs_process_rewards``
    trait, as ``prime``'s): only an implicit PRM gives them."""
    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.core_algos.estimators import estimator_traits

    return estimator_traits(estimator).needs_process_rewards


def _check_implicit_prm(cfg: RLConfig) -> None:
    """PRIME's pieces come together: the ``prime`` estimator reads an implicit PRM's rewards (and groups of
    two or more), an implicit PRM feeds only it, and one copied from a 4-bit QLoRA policy cannot train."""
    estimator, implicit = cfg.algorithm.adv_estimator, is_implicit_prm(cfg.reward.process)
    reads = _reads_process_rewards(estimator)
    if reads and not implicit:
        raise ConfigError(
            f"algorithm.adv_estimator: {estimator} needs PRIME's implicit PRM: set reward.process to "
            "implicit_prm (from the policy) or implicit_prm:PATH"
        )
    if implicit and not reads:
        raise ConfigError(
            f"reward.process: the implicit PRM's process rewards are read by algorithm.adv_estimator: prime, "
            f"not {estimator}"
        )
    if reads and cfg.rollout.n < 2:
        raise ConfigError(
            f"algorithm.adv_estimator: {estimator}'s leave-one-out baseline needs rollout.n >= 2"
        )
    if cfg.reward.process == "implicit_prm" and cfg.model.lora.load_in_4bit:
        raise ConfigError(
            "reward.process: implicit_prm copies the policy's weights to train them, which a 4-bit QLoRA "
            "base cannot give: use implicit_prm:PATH"
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


def _check_lora(cfg: RLConfig) -> None:
    """LoRA needs peft; QLoRA needs an adapter, CUDA and bitsandbytes, and no PPO critic (a trainable copy
    of a 4-bit body)."""
    # lazy: pulls in torch (this module loads for `rewardlab --help`, which imports no torch)
    from rewardlab.core_algos.estimators import estimator_traits
    from rewardlab.training.lora import qlora_unavailable

    lc = cfg.model.lora
    targets = [lc.target_modules] if isinstance(lc.target_modules, str) else lc.target_modules
    if not targets or not all(isinstance(t, str) and t for t in targets):
        raise ConfigError(
            f"model.lora.target_modules must be all-linear or a list of module names, got {lc.target_modules!r}"
        )
    if lc.enabled:
        try:
            require_installed("peft", extra="rl", what="LoRA (model.lora.r > 0)")
        except MissingExtraError as exc:  # there is no lora extra: peft comes with rl (and rm)
            raise ConfigError(f"model.lora.r: {exc}") from exc
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


CHECKS: tuple[Callable[[RLConfig], None], ...] = (
    _check_tracker_packages,
    _check_device,
    _check_micro_batches,
    _check_advantages,
    _check_length_budget,
    _check_prompt_filter,
    _check_curriculum,
    _check_async,
    _check_tree,
    _check_overlong,
    _check_vllm_modes,
    _check_sources,
    _check_process,
    _check_implicit_prm,
    _check_shaping,
    _check_lora,
    _check_strategy,
    _check_env,
)
"""What :func:`validate` runs after the fields' own checks, in order (the first failure is the message)."""
