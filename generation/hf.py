"""The ``hf`` rollout backend: transformers ``generate``, batched with left padding.

* Prompts are sorted by length and generated in chunks of at most ``batch_size`` sequences (prompt x n),
  so padding stays small; the output keeps the input order.
* Log-probabilities of the sampled tokens are gathered on the fly by a logits processor that runs before
  the temperature / top-k / top-p warpers (it holds one step of log-softmax at a time, never the whole
  ``(steps, batch, vocab)`` logits tensor that ``output_logits=True`` would keep). They are
  ``log_softmax(logits / temperature)``: the same distribution the trainer recomputes.
* Stop strings use transformers' ``StopStringCriteria`` to end a sequence early, then each sample is cut
  at the first token whose prefix contains a stop string (the same rule as vLLM).
* With ``on_finished``, a row is reported the decoding step it ends (EOS, a stop string, its token limit) by a
  stopping criterion that never stops anything itself (:class:`_FinishedRows`), so its reward can be computed
  while the rest of the chunk decodes; the reported sample is the one ``generate`` returns.
* Multi-turn episodes (:meth:`HFBackend.interact`) run in one decoding loop where each episode's next turn
  starts as soon as its reply is in (:mod:`.interleave`).
* Within ``with backend.prefix_cache():`` (a multi-turn rollout turn by turn) each sample's KV cache is kept, and a later
  prompt that extends a sample's tokens prefills only its new tokens (:mod:`.prefix_cache`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from transformers import LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from rewardlab.generation import prefix_cache as pc
from rewardlab.generation.base import (
    FinishedReporter,
    Generation,
    OnFinished,
    Prompt,
    Respond,
    RolloutBackend,
    SamplingParams,
    cut_at_stop,
    prompt_ids,
    stop_end,
)
from rewardlab.generation.interleave import TurnLoop, stop_criteria
from rewardlab.training.lora import base_model


class _SampledLogprobs(LogitsProcessor):
    """Records log p(sampled token) at each step without changing the scores.

    At step t it sees ``input_ids`` ending with the token sampled at step t-1, gathers that token's
    log-probability from the distribution it stored at t-1, and stores step t's distribution.
    """

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature if temperature > 0 else 1.0
        self.prev: torch.Tensor | None = None
        self.gathered: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.prev is not None:
            self.gathered.append(self.prev.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self.prev = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, last_tokens: torch.Tensor) -> torch.Tensor:
        """The ``(batch, steps)`` log-probabilities, given the tokens sampled at the final step."""
        if self.prev is not None:
            self.gathered.append(self.prev.gather(-1, last_tokens[:, None]).squeeze(-1))
            self.prev = None
        if not self.gathered:
            return torch.zeros(last_tokens.shape[0], 0)
        return torch.stack(self.gathered, dim=1)


class _FinishedRows(StoppingCriteria):
    """Reports each row of a ``generate`` call at the step it ends, and stops none (transformers' own criteria
    do): EOS as the last token, the token limit, or a stop string (a ``StopStringCriteria`` of its own, the
    same test as transformers'). A row reported here is cut as the whole output would be
    (``HFBackend._finish_sample``); a row whose end is ambiguous (a stop string that decoding does not
    reproduce) is left to the report after ``generate``."""

    def __init__(self, backend: HFBackend, params: SamplingParams, width: int, finish: Any) -> None:
        self.backend, self.params, self.width, self.finish = backend, params, width, finish
        self.eos = torch.tensor(sorted(backend.eos_ids), dtype=torch.long)
        self.stops = stop_criteria(backend.tokenizer, params.stop)
        self.reported: torch.Tensor | None = None

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any
    ) -> torch.BoolTensor:
        last = input_ids[:, -1].cpu()
        ended = torch.isin(last, self.eos)
        if self.stops is not None:
            ended |= self.stops(input_ids, scores).cpu()
        if input_ids.shape[1] - self.width >= self.params.max_new_tokens:
            ended[:] = True
        if self.reported is None:
            self.reported = torch.zeros_like(ended)
        for row in (ended & ~self.reported).nonzero().flatten().tolist():
            tokens = input_ids[row, self.width :].tolist()
            if self._certain(tokens):
                self.finish(row, tokens)
        self.reported |= ended
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]

    def _certain(self, tokens: list[int]) -> bool:
        """Whether the end of ``tokens`` is the one the whole output will show: EOS, the limit, or a stop
        string that decoding finds (else the fallback of ``_finish_sample`` could differ with padding)."""
        if tokens[-1] in self.backend.eos_ids or len(tokens) >= self.params.max_new_tokens:
            return True
        return stop_end(self.backend._decode, tokens, self.params.stop) is not None


class HFBackend(RolloutBackend):
    """Generates with ``model.generate`` of a transformers causal LM (the policy itself, no copy; a peft
    LoRA model generates with its adapters).

    Args:
        model: The policy (a ``PreTrainedModel``). Generation runs in eval mode under ``inference_mode``
            and the previous train/eval mode is restored afterwards.
        tokenizer: Its tokenizer; a pad token is taken from EOS when it has none.
        batch_size: Most sequences (prompts x samples) per ``generate`` call.
        add_special_tokens: Passed to the tokenizer for the prompts (BOS for Llama-style tokenizers), as
            vLLM does by default.
        share_prefix: Prefill each distinct prompt once and reuse its KV cache for its ``n`` samples
            (``generate`` alone prefills every copy).
        prefix_cache_bytes: Most bytes of samples' KV caches kept within :meth:`prefix_cache` (beyond it a
            sample's continuation prefills whole).
        interleave_turns: Run multi-turn episodes (:meth:`interact`) in one decoding loop, each episode's
            next turn starting as soon as its reply is in; off: one ``generate`` call per turn, earlier turns
            kept by the prefix cache.
        step_tokens: Interleaved turns: most positions one decoding step runs, padding included (rows x
            the widest row's new tokens; a longer reply is fed over several steps).
    """

    name = "hf"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        batch_size: int = 64,
        add_special_tokens: bool = True,
        share_prefix: bool = True,
        prefix_cache_bytes: int = 4 << 30,
        interleave_turns: bool = True,
        step_tokens: int = 8192,
    ) -> None:
        if tokenizer is None:
            raise ValueError("the hf backend needs the tokenizer")
        if isinstance(model, str):
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(model)
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = max(1, int(batch_size))
        self.add_special_tokens = add_special_tokens
        self.share_prefix = share_prefix
        self.prefix_cache_bytes = prefix_cache_bytes
        self.interleave_turns = interleave_turns
        self.step_tokens = step_tokens
        self._store: pc.PrefixStore | None = None
        # transformers renamed ``past_key_values`` to ``cache`` (5.2x); use whichever this version takes (a
        # peft model's forward passes keywords through: its base model's signature decides).
        import inspect

        forward = base_model(model).forward
        self._cache_kw = "cache" if "cache" in inspect.signature(forward).parameters else "past_key_values"
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        eos = getattr(model.generation_config, "eos_token_id", None)
        if eos is None:
            eos = tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos]) - {None}
        if tokenizer.eos_token_id is not None:
            self.eos_ids.add(tokenizer.eos_token_id)

    def update_weights(self, model: Any) -> None:
        # The backend samples from the policy object itself, so an optimiser step is already visible; a
        # different object (e.g. an unwrapped copy) is loaded into ours.
        if model is not self.model:
            self.model.load_state_dict(model.state_dict())

    @contextlib.contextmanager
    def prefix_cache(self, branching: bool = False) -> Iterator[None]:
        """Keeps every sample's KV cache until the block ends, so that a prompt extending a sample's tokens
        (with ``branching``, also one that a sample's tokens extend) prefills only its new ones; the weights
        must not change inside the block."""
        self._store = pc.PrefixStore(self.prefix_cache_bytes, branching=branching)
        try:
            yield
        finally:
            self._store = None

    def generate(
        self, prompts: Sequence[Prompt], params: SamplingParams, on_finished: OnFinished | None = None
    ) -> list[list[Generation]]:
        if not prompts:
            return []
        reporter = FinishedReporter(on_finished) if on_finished is not None else None
        encoded = prompt_ids(self.tokenizer, prompts, self.add_special_tokens)
        n = max(1, int(params.n))
        # One entry per sequence to sample, sorted by prompt length to keep padding small.
        jobs = [(i, k) for i in range(len(prompts)) for k in range(n)]
        jobs.sort(key=lambda job: len(encoded[job[0]]))
        out: list[list[Generation | None]] = [[None] * n for _ in prompts]
        with self._sampling(params):
            for start in range(0, len(jobs), self.batch_size):
                chunk = jobs[start : start + self.batch_size]
                ids = [encoded[i] for i, _ in chunk]
                report = None if reporter is None else _chunk_reporter(reporter, chunk, ids)
                gens = self._generate_chunk(ids, params, [i for i, _ in chunk], report)
                for (i, k), gen in zip(chunk, gens, strict=False):
                    out[i][k] = gen
        return out if reporter is None else reporter.rest(out)  # type: ignore[arg-type, return-value]

    def interact(self, prompts: Sequence[Prompt], params: SamplingParams, respond: Respond) -> None:
        """Multi-turn episodes in one decoding loop (:mod:`.interleave`) when ``interleave_turns`` is on and
        the model's cache is plain attention; otherwise one ``generate`` call per turn."""
        encoded = prompt_ids(self.tokenizer, prompts, self.add_special_tokens)
        if not (self.interleave_turns and all(encoded) and pc.reusable(self._new_cache())):
            super().interact(prompts, params, respond)
            return
        with self._sampling(params):
            loop = TurnLoop(self, params, respond, batch_size=self.batch_size, step_tokens=self.step_tokens)
            loop.run(encoded)

    @contextlib.contextmanager
    def _sampling(self, params: SamplingParams) -> Iterator[None]:
        """Eval mode and no autograd; with ``params.seed``, a seeded RNG that leaves the global one as it was."""
        rng = torch.random.fork_rng(devices=[]) if params.seed is not None else contextlib.nullcontext()
        was_training = self.model.training
        self.model.eval()
        try:
            with rng, torch.inference_mode():
                if params.seed is not None:
                    torch.manual_seed(params.seed)
                yield
        finally:
            self.model.train(was_training)

    def _new_cache(self) -> Any:
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    def _generate_chunk(
        self,
        prompt_ids: list[list[int]],
        params: SamplingParams,
        keys: list[int] | None = None,
        report: Any | None = None,
    ) -> list[Generation]:
        """Samples one chunk; ``report(row, generation)`` hears of each row as it ends (:class:`_FinishedRows`)."""
        device = next(self.model.parameters()).device
        prefixes = [self._store.take(ids) for ids in prompt_ids] if self._store is not None else []
        if any(p.entry is not None for p in prefixes):
            input_ids, attention_mask, cache = self._continuation_inputs(prompt_ids, prefixes, device)
        else:
            input_ids, attention_mask = self._left_padded(prompt_ids)
            cache = None
            if self.share_prefix and keys is not None and input_ids.shape[1] > 1:
                cache = self._shared_prompt_cache(input_ids, attention_mask, keys, device)
            if cache is None and self._store is not None:
                cache = self._new_cache()
        width = input_ids.shape[1]
        recorder = _SampledLogprobs(params.temperature) if params.logprobs else None
        kwargs = self._generate_kwargs(params, recorder)
        if report is not None:
            rows = _FinishedRows(
                self, params, width, self._row_finisher(prompt_ids, params, recorder, report)
            )
            kwargs["stopping_criteria"] = StoppingCriteriaList([rows])
        if cache is not None:
            kwargs[self._cache_kw] = cache
        sequences = self.model.generate(
            input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), **kwargs
        )
        new_tokens = sequences[:, width:].cpu()
        logprobs = recorder.finish(new_tokens[:, -1]).cpu() if recorder is not None else None
        if new_tokens.shape[1] == 0:
            logprobs = None if logprobs is None else logprobs[:, :0]
        gens = []
        for row, ids in enumerate(prompt_ids):
            tokens = new_tokens[row].tolist()
            lp = logprobs[row].tolist() if logprobs is not None else None
            gens.append(self._finish_sample(tokens, list(ids), lp, params))
        if self._store is not None and pc.reusable(cache) and new_tokens.shape[1]:
            full_mask = torch.cat([attention_mask, torch.ones_like(new_tokens)], dim=1)
            self._store.store_rows(cache, full_mask, [g.prompt_token_ids + g.token_ids for g in gens])
        return gens

    def _row_finisher(
        self,
        prompt_ids: list[list[int]],
        params: SamplingParams,
        recorder: _SampledLogprobs | None,
        report: Any,
    ) -> Any:
        """What :class:`_FinishedRows` calls with a row and its tokens so far: the row's sample, its
        log-probabilities read from the recorder mid-decoding (the steps gathered so far, then the last
        token's from the step's distribution: the values ``recorder.finish`` will give), reported."""

        def finish(row: int, tokens: list[int]) -> None:
            lp = None
            if recorder is not None and recorder.prev is not None:
                steps = [g[row] for g in recorder.gathered] + [recorder.prev[row, tokens[-1]]]
                lp = torch.stack(steps).cpu().tolist()
            report(row, self._finish_sample(tokens, list(prompt_ids[row]), lp, params))

        return finish

    def _left_padded(self, prompt_ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """The prompts as one batch, left-padded so that each ends where generation starts."""
        width = max(len(p) for p in prompt_ids)
        input_ids = torch.full((len(prompt_ids), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        for row, ids in enumerate(prompt_ids):
            if ids:
                input_ids[row, width - len(ids) :] = torch.tensor(ids)
                attention_mask[row, width - len(ids) :] = 1
        return input_ids, attention_mask

    def _continuation_inputs(
        self, prompt_ids: list[list[int]], prefixes: list[pc.Prefix], device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """Prompts that extend kept samples: the kept keys and values as the cache (each row's right-aligned
        at the cache's end), then each prompt's remaining tokens right-aligned at the batch's end, with a gap
        of padding between where rows differ (masked; position ids count real tokens only)."""
        cache, cached = pc.batched_cache(prefixes)
        rest = max(len(ids) - p.length for ids, p in zip(prompt_ids, prefixes, strict=True))
        input_ids = torch.full((len(prompt_ids), cached + rest), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        for row, (ids, prefix) in enumerate(zip(prompt_ids, prefixes, strict=True)):
            head, tail = ids[: prefix.length], ids[prefix.length :]
            if head:
                input_ids[row, cached - len(head) : cached] = torch.tensor(head)
                attention_mask[row, cached - len(head) : cached] = 1
            input_ids[row, cached + rest - len(tail) :] = torch.tensor(tail)
            attention_mask[row, cached + rest - len(tail) :] = 1
        return input_ids, attention_mask, cache

    def _generate_kwargs(self, params: SamplingParams, recorder: _SampledLogprobs | None) -> dict[str, Any]:
        greedy = params.temperature <= 0
        kwargs: dict[str, Any] = {
            "max_new_tokens": params.max_new_tokens,
            "do_sample": not greedy,
            "pad_token_id": self.pad_id,
            "eos_token_id": sorted(self.eos_ids) or None,
            "use_cache": True,
            "logits_processor": LogitsProcessorList([recorder]) if recorder else None,
        }
        if not greedy:
            # top_k=0 must be passed explicitly: generation configs often default to 50.
            kwargs.update(temperature=params.temperature, top_p=params.top_p, top_k=params.top_k)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        if params.stop:
            kwargs.update(stop_strings=list(params.stop), tokenizer=self.tokenizer)
        return kwargs

    def _shared_prompt_cache(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, keys: list[int], device: torch.device
    ) -> Any | None:
        """The KV cache of the prompts (all but their last token), computed once per distinct prompt.

        The ``n`` samples of a prompt sit in consecutive rows; ``generate`` would prefill each copy. Here
        each distinct prompt is prefilled once and its cache rows are repeated, so ``generate`` only runs the
        last prompt token and the new ones (what vLLM's prefix caching saves, for the hf backend).
        """
        firsts = [r for r in range(len(keys)) if r == 0 or keys[r] != keys[r - 1]]
        if len(firsts) == len(keys):
            return None
        owner = torch.tensor(
            [len([f for f in firsts if f <= r]) - 1 for r in range(len(keys))], device=device
        )
        u_ids = input_ids[firsts].to(device)
        u_mask = attention_mask[firsts].to(device)
        position_ids = (u_mask.cumsum(-1) - 1).clamp(min=0)
        cache = self._new_cache()
        self.model(
            input_ids=u_ids[:, :-1],
            attention_mask=u_mask[:, :-1],
            position_ids=position_ids[:, :-1],
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kw: cache},
        )
        cache.batch_select_indices(owner)
        return cache

    def _finish_sample(
        self, tokens: list[int], prompt_ids: list[int], logprobs: list[float] | None, params: SamplingParams
    ) -> Generation:
        end, reason = len(tokens), "length"
        for pos, tok in enumerate(tokens):
            if tok in self.eos_ids:
                end, reason = pos + 1, "stop"
                break
        # A stopped sequence is padded after its end; with pad == EOS the scan above already cut it.
        text = self._decode(tokens[:end])
        cut = stop_end(self._decode, tokens[:end], params.stop, text)
        if cut is not None:
            text = cut_at_stop(text if cut == end else self._decode(tokens[:cut]), params)
            end, reason = cut, "stop"
        if reason == "length" and len(tokens) < params.max_new_tokens:
            # The whole chunk ended early, so generate() saw this sample stop (a stop-string match our
            # decoding did not reproduce): drop its padding.
            reason = "stop"
            while end > 0 and tokens[end - 1] == self.pad_id:
                end -= 1
        return Generation(
            text=text,
            token_ids=tokens[:end],
            prompt_token_ids=prompt_ids,
            logprobs=logprobs[:end] if logprobs is not None else None,
            finish_reason=reason,  # type: ignore[arg-type]
        )

    def _decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=True)


def _chunk_reporter(reporter: FinishedReporter, chunk: list[tuple[int, int]], ids: list[list[int]]) -> Any:
    """``report(row, generation)`` for one chunk: row ``r`` is sample ``chunk[r]``."""

    def report(row: int, gen: Generation) -> None:
        i, k = chunk[row]
        reporter.report(i, k, gen)

    return report
