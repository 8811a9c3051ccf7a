"""The generative reward model: a causal LM prompted to judge, its verdict parsed from what it writes.

Three modes:

``score``    pointwise; the judge reasons and ends with ``Score: N/10``; reward = (score - lo) / (hi - lo).
``binary``   pointwise; ends with ``Verdict: yes|no`` (is the response right?); reward = 1 for yes, 0 for no.
``pairwise`` two responses (the record's ``completion`` is A, ``metadata["completion_b"]`` is B); ends
             with ``Verdict: A|B``; reward = the share of judgments preferring A (a tie counts half).

With ``k > 1`` the judge samples ``k`` judgments per item and takes the majority verdict (for scores: the
most common score, ties broken towards the mean; or the mean with ``aggregate="mean"``). Unparseable
samples are left out of the vote; an item with no parseable sample gets an error result
(``"no verdict: ..."``) and reward 0, never a guess. ``swap=True`` (pairwise) judges each pair in both
orders and counts both, cancelling position bias (Zheng et al., 2023).

When the backend returns log-probabilities, every parsed verdict also gets the probability the judge gave
to writing it (the product of its tokens' probabilities), from which a soft score follows: P(yes) for
binary, P(A) for pairwise (the other verdict taking the remaining mass), and the verdict's probability for
scores. ``details["soft_score"]`` is its mean over samples; ``reward_from="soft"`` makes it the reward.

Generation goes through the rollout backends of ``rewardlab.generation``: ``hf`` (transformers, CPU or
GPU) or ``vllm``; an existing backend object can be passed to share a model with an RL run. ``openai``
(:mod:`rewardlab.rewardmodels.judge.remote`) asks any OpenAI-compatible chat-completions server instead, with
no local model or tokenizer: the prompts go as chat messages, and a request that fails for good makes its
row ``"judge request failed: ..."``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardlab.extras import require
from rewardlab.generation import SamplingParams, get_backend
from rewardlab.remote import Failed
from rewardlab.rewardmodels.judge.cost import BUDGET_EXHAUSTED
from rewardlab.rewardmodels.judge.parse import KINDS, Verdict, try_parse_verdict
from rewardlab.rewardmodels.judge.remote import ChatAPIBackend
from rewardlab.rewardmodels.judge.templates import get_template, render
from rewardlab.rewardmodels.prm.steps import char_to_token_index
from rewardlab.types import Record, Result, message_text

REMOTE_BACKENDS = ("openai",)
"""Backends that send chat messages to a server (no local model or tokenizer)."""


@dataclass
class JudgeConfig:
    """How the judge prompts, samples and decides.

    Attributes:
        mode: ``"score"`` (1-10), ``"binary"`` (yes/no) or ``"pairwise"`` (A/B).
        template: A built-in template name, a template file, or template text; ``None``: the mode's default.
        scale: Inclusive score range of ``score`` mode (MT-Bench: 1-10).
        k: Judgments sampled per item (majority vote over them).
        temperature: Sampling temperature (0: greedy; with ``k > 1`` use > 0 or the votes are identical).
        top_p: Nucleus sampling mass.
        max_new_tokens: Longest judgment.
        seed: Sampling seed of each call (``None``: global RNG).
        aggregate: ``"majority"`` vote or ``"mean"`` of the parsed verdicts' numeric values.
        swap: Pairwise: also judge with A and B swapped and count both orders.
        allow_tie: Pairwise: accept a tie verdict (counted as half a vote for each side).
        reward_from: ``"verdict"`` (the voted verdict) or ``"soft"`` (the mean soft score, when
            log-probabilities are available; else the verdict).
        use_chat_template: Wrap the prompt in the tokenizer's chat template when it has one (the ``openai``
            backend always sends chat messages: the server applies its template).
        system_prompt: Optional system message.
        b_field: Pairwise: the metadata key holding response B.
    """

    mode: str = "score"
    template: str | None = None
    scale: tuple[int, int] = (1, 10)
    k: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    seed: int | None = None
    aggregate: str = "majority"
    swap: bool = False
    allow_tie: bool = True
    reward_from: str = "verdict"
    use_chat_template: bool = True
    system_prompt: str | None = None
    b_field: str = "completion_b"

    def __post_init__(self) -> None:
        if self.mode not in KINDS:
            raise ValueError(f"unknown judge mode {self.mode!r} (known: {', '.join(KINDS)})")
        if self.aggregate not in ("majority", "mean"):
            raise ValueError("aggregate must be 'majority' or 'mean'")
        if self.reward_from not in ("verdict", "soft"):
            raise ValueError("reward_from must be 'verdict' or 'soft'")
        self.scale = (int(self.scale[0]), int(self.scale[1]))


@dataclass
class Judgment:
    """One sampled judgment.

    Attributes:
        text: What the judge wrote.
        verdict: The parsed verdict, or ``None``.
        error: Why nothing could be parsed, or ``None``.
        verdict_prob: Probability of the verdict's tokens (``None`` without log-probabilities).
        swapped: Pairwise: this judgment saw B first (its verdict is already mapped back to A/B).
    """

    text: str
    verdict: Verdict | None = None
    error: str | None = None
    verdict_prob: float | None = None
    swapped: bool = False
    value: Any = field(default=None)


def _vote(values: list[Any], numeric: list[float], aggregate: str, mode: str) -> tuple[Any, float]:
    """The winning verdict and its numeric value."""
    mean = sum(numeric) / len(numeric)
    if aggregate == "mean":
        if mode == "binary":
            return ("yes" if mean > 0.5 else "no" if mean < 0.5 else "tie"), mean
        if mode == "pairwise":
            return ("A" if mean > 0.5 else "B" if mean < 0.5 else "tie"), mean
        return mean, mean
    counts = Counter(values)
    top = max(counts.values())
    winners = [v for v, c in counts.items() if c == top]
    if mode == "score":
        best = min(winners, key=lambda v: (abs(float(v) - mean), float(v)))
        return best, float(best)
    if len(winners) > 1:
        if mode == "pairwise":
            return "tie", mean
        return "tie", 0.5
    winner = winners[0]
    if mode == "binary":
        return winner, 1.0 if winner == "yes" else 0.0
    return winner, mean  # pairwise: the share of votes for A


class LLMJudge:
    """A generative reward model (LLM-as-a-judge) usable as a reward source.

    Args:
        model: A model path / hub name, or a loaded causal LM (``hf``); ``openai``: the served model's name
            (``None``: the first the server lists).
        tokenizer: Its tokenizer (loaded from ``model`` when it is a path; not used by ``openai``).
        config: A :class:`JudgeConfig`; keyword arguments override its fields.
        backend: ``"hf"``, ``"vllm"``, ``"openai"`` or a ready backend object.
        backend_kwargs: Passed to ``get_backend`` (``openai``: :class:`~rewardlab.rewardmodels.judge.remote.
            ChatAPIConfig` fields, or ``config=ChatAPIConfig(...)``).
    """

    name = "judge"

    def __init__(
        self,
        model: Any = None,
        tokenizer: Any = None,
        config: JudgeConfig | None = None,
        *,
        backend: Any = "hf",
        backend_kwargs: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> None:
        if config is None:
            config = JudgeConfig(**overrides)
        elif overrides:
            from dataclasses import replace

            config = replace(config, **overrides)
        self.config = config
        self.template = get_template(config.template, config.mode)
        if isinstance(backend, str) and backend in REMOTE_BACKENDS:
            if model is not None and not isinstance(model, str):
                raise ValueError("the openai backend takes the served model's name, not a model object")
            self.backend = ChatAPIBackend(model, **(backend_kwargs or {}))
        elif isinstance(backend, str):
            require("torch", "transformers", extra="rm", what=f"a local LLM judge (backend {backend})")
            if tokenizer is None and isinstance(model, str):
                from transformers import AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(model)
            if backend == "hf" and isinstance(model, str):
                import torch
                from transformers import AutoModelForCausalLM

                model = AutoModelForCausalLM.from_pretrained(model)
                if torch.cuda.is_available():
                    model.to("cuda")
            self.backend = get_backend(backend, model, tokenizer, **(backend_kwargs or {}))
        else:
            self.backend = backend
            tokenizer = tokenizer or getattr(backend, "tokenizer", None)
        if tokenizer is None and not self.chat_messages:
            raise ValueError("the judge needs a tokenizer")
        self.tokenizer = tokenizer

    @property
    def chat_messages(self) -> bool:
        """Whether prompts go to the backend as chat messages (a server applies the template)."""
        return bool(getattr(self.backend, "takes_messages", False))

    # ---- prompts ----------------------------------------------------------------------------------------

    def wrap_prompt(self, text: str) -> str | list[dict[str, str]]:
        """A rendered template as the backend's prompt (what :meth:`run` takes): chat messages, or text in the
        local chat template."""
        if self.chat_messages:
            system = (
                [{"role": "system", "content": self.config.system_prompt}]
                if self.config.system_prompt
                else []
            )
            return [*system, {"role": "user", "content": text}]
        if self.config.use_chat_template and getattr(self.tokenizer, "chat_template", None):
            messages = []
            if self.config.system_prompt:
                messages.append({"role": "system", "content": self.config.system_prompt})
            messages.append({"role": "user", "content": text})
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        if self.config.system_prompt:
            return self.config.system_prompt + "\n\n" + text
        return text

    def build_prompts(self, record: Record) -> list[tuple[Any, bool]]:
        """The judge prompts of one record: ``(prompt, swapped)`` pairs (two when pairwise with ``swap``)."""
        reference = record.reference if isinstance(record.reference, (str, int, float)) else None
        if self.config.mode != "pairwise":
            text = render(
                self.template, prompt=record.prompt_text, response=record.completion_text, reference=reference
            )
            return [(self.wrap_prompt(text), False)]
        meta = record.metadata or {}
        if self.config.b_field not in meta:
            raise KeyError(f"pairwise judging needs metadata[{self.config.b_field!r}] (response B)")
        a, b = record.completion_text, message_text(meta[self.config.b_field])
        # With ``swap`` the same prompt again with B shown first: position bias shows as disagreement.
        orders = [(a, b, False), (b, a, True)] if self.config.swap else [(a, b, False)]
        return [
            (
                self.wrap_prompt(
                    render(
                        self.template,
                        prompt=record.prompt_text,
                        response_a=first,
                        response_b=second,
                        reference=reference,
                    )
                ),
                swapped,
            )
            for first, second, swapped in orders
        ]

    # ---- judging ----------------------------------------------------------------------------------------

    def _parse(self, generation: Any, swapped: bool) -> Judgment:
        cfg = self.config
        verdict, error = try_parse_verdict(
            generation.text, cfg.mode, scale=cfg.scale, allow_tie=cfg.allow_tie
        )
        judgment = Judgment(text=generation.text, verdict=verdict, error=error, swapped=swapped)
        if verdict is None:
            return judgment
        value = verdict.value
        if swapped and value in ("A", "B"):
            value = "B" if value == "A" else "A"
        judgment.value = value
        logprobs = getattr(generation, "logprobs", None)
        tokens = getattr(generation, "tokens", None)
        if logprobs and tokens is not None:  # a server's tokens as text: no tokenizer needed
            judgment.verdict_prob = span_probability(tokens, logprobs, generation.text, verdict)
        elif logprobs:
            judgment.verdict_prob = verdict_probability(
                self.tokenizer, generation.token_ids, logprobs, verdict
            )
        return judgment

    def _soft(self, judgment: Judgment) -> float | None:
        p = judgment.verdict_prob
        if p is None:
            return None
        if self.config.mode == "binary":
            return p if judgment.value == "yes" else 1.0 - p
        if self.config.mode == "pairwise":
            return p if judgment.value == "A" else 1.0 - p if judgment.value == "B" else 0.5
        return p

    def sampling_params(self) -> SamplingParams:
        """How every judge prompt is sampled: ``k`` judgments, with log-probabilities."""
        cfg = self.config
        return SamplingParams(
            n=max(1, cfg.k),
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            max_new_tokens=cfg.max_new_tokens,
            seed=cfg.seed,
            logprobs=True,
        )

    def run(
        self, prompts: Sequence[Any], swapped: Sequence[bool] | None = None
    ) -> list[list[Judgment] | Failed]:
        """The parsed judgments of ready prompts (:meth:`wrap_prompt`'s), all in ONE backend call: ``k`` per
        prompt, or :class:`~rewardlab.remote.Failed` for a prompt whose request failed for good (or that the
        budget did not send). ``swapped[i]``: prompt ``i`` shows B first (pairwise)."""
        if not prompts:
            return []
        orders = list(swapped) if swapped is not None else [False] * len(prompts)
        groups = self.backend.generate(list(prompts), self.sampling_params())
        if len(groups) != len(prompts):  # a broken backend: every prompt's error, not a misaligned verdict
            return [Failed(f"the backend returned {len(groups)} results for {len(prompts)} prompts")] * len(
                prompts
            )
        out: list[list[Judgment] | Failed] = []
        for order, gens in zip(orders, groups, strict=True):
            if isinstance(gens, Failed):
                out.append(gens)
            else:
                out.append([self._parse(g, order) for g in gens])
        return out

    def judge(self, records: Sequence[Record]) -> list[Result]:
        """Judges every record; one :class:`Result` each, in order."""

        results: list[Result | None] = [None] * len(records)
        prompts: list[Any] = []
        owners: list[tuple[int, bool]] = []
        for i, record in enumerate(records):
            try:
                for prompt, swapped in self.build_prompts(record):
                    prompts.append(prompt)
                    owners.append((i, swapped))
            except (KeyError, ValueError) as exc:
                results[i] = Result.failure(f"judge input error: {exc}")
        groups = self.run(prompts, [swapped for _, swapped in owners])
        per_record: dict[int, list[Judgment]] = {}
        failed: dict[int, str] = {}
        for (i, _), judgments in zip(owners, groups, strict=True):
            if isinstance(judgments, Failed):  # a server request that failed for good: this row's error
                failed.setdefault(i, judgments.error)
                continue
            per_record.setdefault(i, []).extend(judgments)
        for i, judgments in per_record.items():
            if i not in failed:
                results[i] = self.decide(judgments)
        for i, error in failed.items():
            results[i] = Result.failure(request_error(error))
        return [r if r is not None else Result.failure("judge error: no judgment") for r in results]

    def usage(self) -> dict[str, int] | None:
        """What a server backend used (requests, cache hits, retries, failures, tokens); ``None`` for local
        backends."""
        usage = getattr(self.backend, "usage", None)
        return usage() if callable(usage) else None

    def decide(self, judgments: Sequence[Judgment]) -> Result:
        """The result of one item from its sampled judgments (majority / mean over the parsed ones)."""
        cfg = self.config
        parsed = [j for j in judgments if j.verdict is not None]
        details: dict[str, Any] = {
            "mode": cfg.mode,
            "votes": [j.value for j in judgments],
            "n_samples": len(judgments),
            "n_parsed": len(parsed),
            "outputs": [j.text for j in judgments],
        }
        if not parsed:
            reasons = Counter(j.error for j in judgments)
            details["parse_errors"] = [j.error for j in judgments]
            return Result.failure(f"no verdict: {reasons.most_common(1)[0][0]}", **details)
        values = [j.value for j in parsed]
        numeric = [
            j.verdict.numeric if not j.swapped else {"A": 1.0, "B": 0.0}.get(j.value, 0.5) for j in parsed
        ]
        verdict, value = _vote(values, numeric, cfg.aggregate, cfg.mode)
        details["verdict"] = verdict
        if cfg.mode == "score":
            lo, hi = cfg.scale
            details["score"] = value
            reward = (value - lo) / (hi - lo) if hi > lo else 0.0
        else:
            reward = value
        softs = [s for s in (self._soft(j) for j in parsed) if s is not None]
        if softs:
            details["soft_score"] = sum(softs) / len(softs)
            details["verdict_probs"] = [j.verdict_prob for j in parsed]
            if cfg.reward_from == "soft" and cfg.mode != "score":
                reward = details["soft_score"]
        return Result(reward=float(reward), details=details)

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        """Reward-source interface (the same as :meth:`judge`)."""
        return self.judge(records)

    def score(self, record: Record) -> Result:
        return self.judge([record])[0]

    def compare(self, prompt: str, response_a: str, response_b: str) -> Result:
        """Pairwise judgment of two responses (the judge must be in ``pairwise`` mode)."""
        if self.config.mode != "pairwise":
            raise ValueError("compare needs a pairwise judge")
        record = Record(prompt=prompt, completion=response_a, metadata={self.config.b_field: response_b})
        return self.judge([record])[0]

    def close(self) -> None:
        close = getattr(self.backend, "close", None)
        if close:
            close()


def request_error(error: str) -> str:
    """A row's error for a prompt that got no judgment: ``judge request failed: <why>``, or the budget's own
    message (``judge budget exhausted: ...``) for a prompt the budget did not send."""
    return error if error.startswith(BUDGET_EXHAUSTED) else f"judge request failed: {error}"


def verdict_probability(
    tokenizer: Any, token_ids: Sequence[int], logprobs: Sequence[float], verdict: Verdict
) -> float | None:
    """Probability of the tokens that wrote ``verdict`` (from its character span in the decoded output)."""

    if not token_ids or len(logprobs) < 1:
        return None
    first, last = char_to_token_index(tokenizer, token_ids, [verdict.start + 1, verdict.end])
    if first < 0 or last < first or last >= len(logprobs):
        return None
    total = sum(float(x) for x in logprobs[first : last + 1])
    return math.exp(total) if math.isfinite(total) else None


def span_probability(
    tokens: Sequence[str], logprobs: Sequence[float], text: str, verdict: Verdict
) -> float | None:
    """Probability of the tokens that wrote ``verdict``, from the tokens' texts (a server's ``logprobs.content``):
    the tokens whose characters overlap the verdict's span. ``None`` when the tokens do not spell ``text``
    (byte-level pieces of a multi-byte character, a server that strips): no guessing."""
    if not tokens or len(tokens) != len(logprobs) or "".join(tokens) != text:
        return None
    total, offset, found = 0.0, 0, False
    for token, logprob in zip(tokens, logprobs, strict=True):
        start, offset = offset, offset + len(token)
        if offset > verdict.start and start < verdict.end:
            total += float(logprob)
            found = True
    if not found or not math.isfinite(total):
        return None
    return math.exp(total)


__all__ = [
    "JudgeConfig",
    "Judgment",
    "LLMJudge",
    "request_error",
    "span_probability",
    "verdict_probability",
]
