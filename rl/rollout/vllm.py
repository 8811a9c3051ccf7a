"""The ``vllm`` rollout backend: a vLLM engine colocated with the trainer, fed the policy's weights.

* The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, as TRL's colocate mode) so that
  :meth:`VLLMBackend.update_weights` can hand the trainer's tensors to the model's own ``load_weights``
  through the worker's ``reload_weights`` without a copy through a pipe; the prefix cache is reset afterwards,
  since KV blocks computed with the old weights are stale.
* A model object is saved once (``save_pretrained``, with its tokenizer) to a temporary folder for the
  engine to load; a path or hub name is passed straight through. A peft LoRA policy is saved and pushed
  merged (``W + scaling * B @ A`` per adapted layer, computed on the fly under the base model's names);
  vLLM's own LoRA adapter path (``enable_lora``) is the untried alternative.
* Log-probabilities are vLLM's ``processed_logprobs``: the distribution the token was actually sampled
  from (after temperature, top-k, top-p), which is the behaviour policy that importance-sampling
  correction (``algorithm.rollout_is``) needs. With ``top_p=1, top_k=0`` it is ``log_softmax(logits / T)``,
  the same quantity the hf backend reports.
* vLLM needs ``if __name__ == "__main__":`` in scripts when it spawns workers; on CPU set
  ``VLLM_CPU_KVCACHE_SPACE`` (GiB) and a small ``gpu_memory_utilization``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from rewardkit.rl.rollout.base import Generation, RolloutBackend, SamplingParams
from rewardkit.training.lora import merged_weights, plain_model
from rewardkit.training.parallel import full_tensor, is_sharded


def vllm_available() -> tuple[bool, str]:
    """``(True, version)`` when vLLM imports, else ``(False, reason)``."""
    # The colocated engine runs in this process (see the module docstring); set before vLLM reads it.
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    try:
        import vllm

        return True, str(getattr(vllm, "__version__", "?"))
    except Exception as exc:  # ImportError, or a broken install (mismatched torch ops)
        return False, f"vllm is not usable here: {type(exc).__name__}: {exc}"


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
        **llm_kwargs: Any,
    ) -> None:
        # In-process engine: update_weights hands tensors over directly (must be set before vllm imports).
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        ok, why = vllm_available()
        if not ok:
            raise ImportError(why)
        from vllm import LLM

        self._tmp: str | None = None
        if isinstance(model, str):
            path = model
        else:
            self._tmp = tempfile.mkdtemp(prefix="rewardkit-vllm-")
            # FSDP: every rank saves the whole weights, gathered as update_weights gathers them
            whole = {"state_dict": {n: t.cpu() for n, t in self._weights(model)}} if is_sharded(model) else {}
            plain_model(model).save_pretrained(self._tmp, safe_serialization=True, **whole)  # LoRA: merged
            if tokenizer is not None:
                tokenizer.save_pretrained(self._tmp)
            path = self._tmp
        self.tokenizer = tokenizer
        kwargs: dict[str, Any] = {
            "model": path,
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

    def generate(self, prompts: list[str], params: SamplingParams) -> list[list[Generation]]:
        if not prompts:
            return []
        from vllm import SamplingParams as VSamplingParams

        sp = VSamplingParams(
            n=max(1, int(params.n)),
            temperature=max(0.0, float(params.temperature)),
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else 0,
            max_tokens=params.max_new_tokens,
            stop=list(params.stop) or None,
            seed=params.seed,
            logprobs=0 if params.logprobs else None,
            include_stop_str_in_output=params.include_stop_str_in_output,
            skip_special_tokens=True,
        )
        if self.tokenizer is not None:
            # Token ids from the trainer's tokenizer: both backends (and the trainer) see the same prompt ids
            # whatever vLLM's own tokenizer loading does with this tokenizer.
            inputs: list[Any] = [
                {"prompt_token_ids": ids}
                for ids in self.tokenizer(list(prompts), add_special_tokens=True)["input_ids"]
            ]
        else:
            inputs = list(prompts)
        outputs = self.llm.generate(inputs, sp, use_tqdm=False)
        result: list[list[Generation]] = []
        for req in outputs:
            prompt_ids = list(req.prompt_token_ids or [])
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
                        text=self._text(out, token_ids, params),
                        token_ids=token_ids,
                        prompt_token_ids=prompt_ids,
                        logprobs=logprobs,
                        finish_reason=reason,  # type: ignore[arg-type]
                    )
                )
            result.append(group)
        return result

    def _text(self, out: Any, token_ids: list[int], params: SamplingParams) -> str:
        """The completion text decoded with the trainer's tokenizer (vLLM's own when there is none)."""
        if self.tokenizer is None:
            return out.text
        text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
        if params.stop:
            hits = [(text.find(s), s) for s in params.stop if s and s in text]
            if hits:
                idx, stop = min(hits, key=lambda h: (h[0], -len(h[1])))
                text = text[: idx + len(stop)] if params.include_stop_str_in_output else text[:idx]
        return text

    def update_weights(self, model: Any) -> None:
        """Loads ``model``'s current weights into the engine (``load_weights`` of vLLM's model class). A peft
        LoRA model's weights arrive merged under the base names (:func:`rewardkit.training.lora.merged_weights`:
        ``W + scaling * B @ A`` one layer at a time, as the engine consumes them)."""
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
        self.llm.reset_prefix_cache()

    @staticmethod
    def _weights(model: Any) -> Any:
        """``(name, tensor)`` pairs of the policy as a plain transformers model (lazily, in process; a list
        when the engine runs in another process, which pickles its arguments)."""
        weights = ((name, full_tensor(t)) for name, t in merged_weights(model))  # FSDP: gathered, in order
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
