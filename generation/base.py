"""The rollout interface: sampling parameters, one generated sample, and the backend protocol.

Every backend returns the same shape: for each prompt, ``n`` :class:`Generation` objects with the sampled
token ids (the end-of-sequence token included when the model emitted it, as vLLM reports it), the text
(special tokens skipped, cut before a stop string unless ``include_stop_str_in_output``), the
log-probability of each sampled token under the temperature-scaled policy, and why the sample ended.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

FinishReason = Literal["stop", "length"]
Prompt = str | list[int]
"""A prompt as text, or as token ids (a multi-turn episode's context, never re-tokenized)."""


def prompt_ids(tokenizer: Any, prompts: Sequence[Prompt], add_special_tokens: bool = True) -> list[list[int]]:
    """The prompts' token ids from the trainer's tokenizer (token-id prompts pass through unchanged): every
    backend and the trainer see the same ids whatever an engine's own tokenizer loading would make of them."""
    texts = [(i, p) for i, p in enumerate(prompts) if isinstance(p, str)]
    out: list[list[int]] = [list(p) if not isinstance(p, str) else [] for p in prompts]
    if texts:
        encoded = tokenizer([p for _, p in texts], add_special_tokens=add_special_tokens)["input_ids"]
        for (i, _), ids in zip(texts, encoded, strict=True):
            out[i] = list(ids)
    return out


@dataclass
class SamplingParams:
    """How to sample completions (names and meanings as vLLM's ``SamplingParams``).

    Attributes:
        n: Samples per prompt (the GRPO group size).
        temperature: Softmax temperature; 0 means greedy decoding.
        top_p: Nucleus sampling mass (1.0 disables it).
        top_k: Keep only the k most likely tokens (0 disables it).
        max_new_tokens: Most tokens generated per sample; a sample that reaches it ends with
            ``finish_reason="length"``.
        stop: Strings that end a sample (``finish_reason="stop"``); the text is cut before the first one.
        seed: Seeds the sampling of this call (the global RNG is left untouched); ``None`` uses the
            global RNG. Every sample of the call is drawn independently, identical prompts included (the
            vLLM backends seed prompt ``i`` with ``seed + i``).
        logprobs: Report the log-probability of each sampled token.
        include_stop_str_in_output: Keep the matched stop string at the end of ``text``.
    """

    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 256
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    logprobs: bool = True
    include_stop_str_in_output: bool = False


@dataclass
class Generation:
    """One sampled completion.

    Attributes:
        text: Decoded completion (special tokens skipped; cut before a stop string by default).
        token_ids: The sampled token ids, through the token that ended the sample (EOS included).
        prompt_token_ids: The prompt's token ids (no padding).
        logprobs: Log-probability of each token of ``token_ids`` under ``softmax(logits / temperature)``
            (before top-k / top-p truncation), or ``None`` when not requested.
        finish_reason: ``"stop"`` (EOS or a stop string) or ``"length"`` (hit ``max_new_tokens``).
        loss_mask: One flag per token of ``token_ids``: 1 for a token the policy sampled, 0 for one an
            environment inserted (a tool's output in a multi-turn episode), which is context for the loss
            but never trained on; ``None``: every token is the policy's.
        branch: A tree rollout's branch: ``(root, length)``, the first ``length`` tokens of ``token_ids`` are
            those of sample ``root`` of the same prompt, sampled once for both; ``None``: sampled whole.
    """

    text: str
    token_ids: list[int]
    prompt_token_ids: list[int]
    logprobs: list[float] | None
    finish_reason: FinishReason
    loss_mask: list[int] | None = None
    branch: tuple[int, int] | None = None

    @property
    def truncated(self) -> bool:
        """True when the sample was cut at ``max_new_tokens`` instead of ending by itself."""
        return self.finish_reason == "length"


def first_stop(text: str, stops: Sequence[str]) -> tuple[int, str] | None:
    """Position and value of the earliest stop string in ``text`` (ties: the longest), or ``None``."""
    best: tuple[int, str] | None = None
    for stop in stops:
        if not stop:
            continue
        idx = text.find(stop)
        if idx >= 0 and (best is None or idx < best[0] or (idx == best[0] and len(stop) > len(best[1]))):
            best = (idx, stop)
    return best


def cut_at_stop(text: str, params: SamplingParams) -> str:
    """``text`` cut before its first stop string (after it with ``include_stop_str_in_output``)."""
    hit = first_stop(text, params.stop)
    if hit is None:
        return text
    idx, stop = hit
    return text[: idx + len(stop)] if params.include_stop_str_in_output else text[:idx]


def stop_end(decode: Any, tokens: Sequence[int], stops: Sequence[str], text: str | None = None) -> int | None:
    """The number of tokens up to the one that completes the first stop string in ``decode(tokens)``
    (vLLM's rule: that token ends the sample), or ``None`` when no stop string occurs. Containment only
    grows with the prefix, so a binary search over prefixes finds it (after a check of the usual case, a stop
    string completed by the last token). ``text``: ``decode(tokens)``, when the caller has it."""
    if not stops or first_stop(decode(list(tokens)) if text is None else text, stops) is None:
        return None
    if first_stop(decode(list(tokens[:-1])), stops) is None:
        return len(tokens)
    lo, hi = 1, len(tokens) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if first_stop(decode(list(tokens[:mid])), stops) is not None:
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass
class NextTurn:
    """How an episode goes on after one of the model's turns (what a :data:`Respond` callback returns)."""

    ids: list[int]
    """Token ids appended after the turn (the environment's reply), before the model's next turn."""
    max_new_tokens: int
    """The next turn's token limit."""


Respond = Callable[[list[tuple[int, Generation]]], list[NextTurn | None]]
"""Called with the turns that just ended, as ``(episode, turn)`` pairs (``episode`` indexes prompt ``i``'s
sample ``k`` as ``i * n + k``; the turn's ``prompt_token_ids`` are the episode's context before it); returns
for each a :class:`NextTurn`, or ``None`` when the episode is over."""


def interact_by_turns(
    backend: Any, prompts: Sequence[Prompt], params: SamplingParams, respond: Respond
) -> None:
    """Multi-turn episodes, one ``generate`` call per turn for all running episodes (any backend): turn 1
    samples ``params.n`` per prompt (sharing the prompt's prefill), each later turn continues every running
    episode's token-id context with one sample, as long as the roomiest episode's limit; the turn's seed is
    ``params.seed + 7919 * (turn - 1)``. Runs in the backend's ``prefix_cache()`` block where it has one."""
    keep_prefixes = getattr(backend, "prefix_cache", contextlib.nullcontext)  # duck-typed backends have none
    contexts: dict[int, list[int]] = {}
    limits: dict[int, int] = {}
    with keep_prefixes():
        gens = [g for group in backend.generate(list(prompts), params) for g in group]
        active = list(range(len(gens)))
        turn = 1
        while active:
            ended = list(zip(active, gens, strict=True))
            nexts = [(j, gen, reply) for (j, gen), reply in zip(ended, respond(ended), strict=True) if reply]
            for j, gen, reply in nexts:
                contexts[j] = list(gen.prompt_token_ids) + list(gen.token_ids) + list(reply.ids)
                limits[j] = reply.max_new_tokens
            active, turn = [j for j, _, _ in nexts], turn + 1
            if active:
                p = replace(
                    params,
                    n=1,
                    max_new_tokens=max(1, max(limits[j] for j in active)),
                    seed=None if params.seed is None else params.seed + 7919 * (turn - 1),
                )
                gens = [g[0] for g in backend.generate([contexts[j] for j in active], p)]


OnFinished = Callable[[int, int, Generation], None]
"""Called once per sample as ``on_finished(prompt_index, sample_index, generation)``, the moment the backend
knows the sample is over (EOS, a stop string, its token limit; a backend that cannot tell before it returns
reports the rest then). The generation is the very object ``generate`` returns in that place. It may be
called from another thread (the vllm-server backend's request threads), never twice for one sample."""


class FinishedReporter:
    """Calls an :data:`OnFinished` callback exactly once per sample: :meth:`report` as samples end (the first
    report of a sample wins; later ones are dropped), :meth:`rest` for whatever was not reported when
    ``generate`` returns. Thread-safe."""

    def __init__(self, on_finished: OnFinished | None) -> None:
        self.on_finished = on_finished
        self.reported: dict[tuple[int, int], Generation] = {}
        self._lock = threading.Lock()

    def report(self, prompt: int, sample: int, gen: Generation) -> Generation:
        """Reports ``gen`` unless this sample was reported; returns the sample's reported generation."""
        with self._lock:
            first = self.reported.setdefault((prompt, sample), gen)
        if first is gen and self.on_finished is not None:
            self.on_finished(prompt, sample, gen)
        return first

    def rest(self, groups: list[list[Generation]]) -> list[list[Generation]]:
        """``groups`` with each sample that was reported replaced by what was reported (the callback and the
        return value hold the same objects), the others reported now."""
        return [[self.report(i, k, gen) for k, gen in enumerate(group)] for i, group in enumerate(groups)]


def takes_on_finished(backend: Any) -> bool:
    """Whether ``backend.generate`` accepts ``on_finished`` (a duck-typed backend may not)."""
    try:
        params = inspect.signature(backend.generate).parameters
    except (TypeError, ValueError):
        return False
    return "on_finished" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def generate_reporting(
    backend: Any, prompts: Sequence[Prompt], params: SamplingParams, on_finished: OnFinished | None
) -> list[list[Generation]]:
    """``backend.generate(prompts, params)`` with ``on_finished`` called once per sample: as samples end where
    the backend takes the callback, otherwise for every sample when it returns."""
    if on_finished is None:
        return backend.generate(prompts, params)
    if takes_on_finished(backend):
        return backend.generate(prompts, params, on_finished=on_finished)
    return FinishedReporter(on_finished).rest(backend.generate(prompts, params))


class RolloutBackend:
    """Base class of rollout backends: ``generate`` samples, ``update_weights`` syncs the policy."""

    name = "base"

    def generate(
        self, prompts: Sequence[Prompt], params: SamplingParams, on_finished: OnFinished | None = None
    ) -> list[list[Generation]]:
        """Samples ``params.n`` completions of each prompt (text, or token ids taken as they are); outer list:
        prompts, inner: samples. ``on_finished`` (see :data:`OnFinished`) hears of each sample as it ends, so
        that its reward can be computed while the others decode."""
        raise NotImplementedError

    def update_weights(self, model: Any) -> None:
        """Makes the backend sample from ``model``'s current weights (after an optimiser step)."""
        raise NotImplementedError

    def prefix_cache(self, branching: bool = False) -> contextlib.AbstractContextManager[None]:
        """A block within which the backend may keep samples' KV caches for prompts that extend them (the
        turns of multi-turn episodes) or, with ``branching``, for prompts that a sample extends (a tree
        rollout's branches: its prompt and the first tokens of a sample, continued several times); the
        weights must not change inside it. A no-op where the backend caches prefixes by itself (vLLM) or not
        at all."""
        return contextlib.nullcontext()

    def interact(self, prompts: Sequence[Prompt], params: SamplingParams, respond: Respond) -> None:
        """Runs multi-turn episodes: ``params.n`` per prompt, each turn at most ``params.max_new_tokens``
        (later turns: their :class:`NextTurn`'s limit), ``respond`` deciding after every turn how each
        episode goes on. By default one :meth:`generate` call per turn (:func:`interact_by_turns`)."""
        interact_by_turns(self, prompts, params, respond)

    def release_memory(self) -> None:
        """Frees the backend's device memory while the trainer updates the policy (vLLM's sleep mode);
        :meth:`update_weights` follows. A no-op where the backend holds nothing worth freeing."""

    def close(self) -> None:
        """Releases engines or worker processes (a no-op where there are none)."""

    def __enter__(self) -> RolloutBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
