"""Multi-turn rollouts: the model's turns, the environment's replies between them, one episode per sample.

The backend schedules the turns (:meth:`~rewardlab.generation.RolloutBackend.interact`) and calls back after
every turn that ends; the callback appends the turn, lets the environment answer (``Environment.step``, all
episodes whose turns ended together at once), tokenizes the observation and appends it with loss mask 0.
The hf backend runs every episode in one decoding loop, an episode's next turn starting as soon as its
observation is in (no waiting for the batch's slowest turn, no prefill of the context again); other backends
run one ``generate`` call per turn, later turns sending each episode's whole context as token ids (vLLM's
prefix cache skips what it has seen). Either way the policy's own tokens are never re-tokenized, and the
trainer's forward pass sees exactly what the sampler saw.

An episode comes back as one :class:`Episode`, a :class:`~rewardlab.generation.Generation` whose
``token_ids`` are every token after the prompt, ``loss_mask`` marks the policy's own, ``logprobs`` are the
sampler's (0 on observation tokens), ``text`` is the answer the reward sources score, and
``finish_reason`` is ``"length"`` when a turn or the episode's token budget ran out (truncation handling
and overlong shaping then apply to the episode as to a single completion). The last token of an episode is
always the model's: an episode never ends on an observation.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from rewardlab.envs.base import (
    END_ANSWER,
    END_BUDGET,
    END_LENGTH,
    Environment,
    EpisodeState,
    StepResult,
    Turn,
)
from rewardlab.envs.config import EnvConfig
from rewardlab.generation.base import (
    Generation,
    NextTurn,
    OnFinished,
    Prompt,
    RolloutBackend,
    SamplingParams,
    interact_by_turns,
)
from rewardlab.types import Record
from rewardlab.verifiers.qa import gold_aliases, has_answer

_ASSISTANT = "\x00rk-assistant\x00"
_OUTPUT = "\x00rk-output\x00"


@dataclass
class Episode(Generation):
    """One episode as one sample (see the module docstring)."""

    state: EpisodeState | None = None
    """Transcript, counters and why it ended."""
    transcript: str = ""
    """Everything after the prompt, decoded: the model's turns and the observations."""

    def summary(self) -> dict[str, Any]:
        """The episode's counters (what :func:`episode_metrics` reads and ``rewardlab eval`` stores): model
        turns, tool calls, failed calls by kind, why it ended, tool seconds, own and observation tokens, and
        whether an observation held the gold answer (:func:`answer_in_observations`)."""
        state = self.state or EpisodeState(record=Record())
        mask = self.loss_mask if self.loss_mask is not None else [1] * len(self.token_ids)
        return {
            "turns": len(state.model_turns),
            "tool_calls": state.tool_calls,
            "tool_errors": dict(state.tool_errors),
            "end": state.end,
            "tool_seconds": state.tool_seconds,
            "tokens": sum(mask),
            "observation_tokens": len(mask) - sum(mask),
            "answer_in_observations": answer_in_observations(state),
        }


class ObservationFormat:
    """Turns a tool's output into the token ids appended after the model's turn: ``template`` with the
    output in it, or (``chat``) what the tokenizer's chat template writes between an assistant turn and the
    next one when a ``tool`` message comes between (end of turn, the tool message, the next assistant
    header), rendered once with placeholders. When the model's turn ended with EOS the template's own
    end-of-turn text, which that token already is, is left out."""

    def __init__(self, tokenizer: Any, template: str, chat: bool) -> None:
        self.tokenizer = tokenizer
        if chat:
            messages = [
                {"role": "user", "content": "?"},
                {"role": "assistant", "content": _ASSISTANT},
                {"role": "tool", "content": _OUTPUT},
            ]
            try:
                text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            except Exception as exc:  # jinja's raise_exception, or no template at all
                raise ValueError(
                    f"the tokenizer's chat template cannot render a tool message ({type(exc).__name__}: {exc}); "
                    "set env.observation_format: text"
                ) from None
            if _OUTPUT not in text:
                raise ValueError(
                    "the tokenizer's chat template drops tool messages; set env.observation_format: text"
                )
            template = text[text.index(_ASSISTANT) + len(_ASSISTANT) :].replace(_OUTPUT, "{output}")
        self.before, _, self.after = template.partition("{output}")
        eos = tokenizer.eos_token_id
        self.eos_text = tokenizer.decode([eos]) if eos is not None and chat else ""

    def ids(self, output: str, ended_with_eos: bool) -> list[int]:
        before = self.before
        if ended_with_eos and self.eos_text and before.startswith(self.eos_text):
            before = before[len(self.eos_text) :]
        return list(self.tokenizer(before + output + self.after, add_special_tokens=False)["input_ids"])


@dataclass
class _Buffer:
    """An episode's tokens after the prompt, as the trainer will see them."""

    prompt: list[int]
    tokens: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)

    def add(self, ids: Sequence[int], own: bool, logprobs: Sequence[float] | None) -> None:
        self.tokens += ids
        self.mask += [int(own)] * len(ids)
        if self.logprobs is not None:
            self.logprobs = None if logprobs is None else self.logprobs + list(logprobs)

    @property
    def context(self) -> list[int]:
        return self.prompt + self.tokens


def cut_observation(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out."""
    if limit and len(text) > limit:
        return text[:limit] + f"\n... ({len(text) - limit} more characters cut)"
    return text


def _within(gen: Generation, budget: int, tokenizer: Any) -> Generation:
    """``gen`` cut to ``budget`` tokens (the rest of the episode's token budget), as truncated."""
    if len(gen.token_ids) <= budget:
        return gen
    ids = gen.token_ids[:budget]
    lps = gen.logprobs[:budget] if gen.logprobs is not None else None
    return replace(
        gen,
        text=tokenizer.decode(ids, skip_special_tokens=True),
        token_ids=ids,
        logprobs=lps,
        finish_reason="length",
    )


def run_episodes(
    backend: RolloutBackend,
    env: Environment,
    records: Sequence[Record],
    prompts: Sequence[Prompt],
    params: SamplingParams,
    tokenizer: Any,
    cfg: EnvConfig,
    *,
    chat: bool = False,
    on_finished: OnFinished | None = None,
) -> list[list[Episode]]:
    """``params.n`` episodes of each record (prompt ``prompts[i]``); outer list: records, inner: episodes.
    ``params.max_new_tokens`` limits each turn, ``cfg.max_tokens`` the whole episode; ``chat``: the prompts
    use the chat template (observations as tool messages with ``observation_format: auto``). The backend
    schedules the turns (:meth:`RolloutBackend.interact`; a duck-typed backend: one ``generate`` per turn).
    ``on_finished(record, k, episode)`` hears of each episode the moment it is over (its last turn ended and
    the environment said so), while the others run on; the episode is the object returned in that place."""
    n = max(1, int(params.n))
    states = [env.reset(record) for record in records for _ in range(n)]
    chat_observations = cfg.observation_format == "chat" or (cfg.observation_format == "auto" and chat)
    fmt = ObservationFormat(tokenizer, cfg.observation_template, chat_observations)
    bufs: list[_Buffer] = [_Buffer([]) for _ in states]
    over: dict[int, Episode] = {}  # episodes handed to ``on_finished``, by index

    def respond(ended: list[tuple[int, Generation]]) -> list[NextTurn | None]:
        """Appends each ended turn, lets the environment answer, and says how each episode goes on."""
        replies: list[NextTurn | None] = [None] * len(ended)
        stepping: dict[bool, list[tuple[int, int, Generation]]] = {}
        for pos, (j, gen) in enumerate(ended):
            if not bufs[j].tokens:  # the first turn: its context is the prompt
                bufs[j].prompt = list(gen.prompt_token_ids)
            kept = _add_turn(states[j], bufs[j], gen, tokenizer, cfg.max_tokens)
            if kept is not None:
                stepping.setdefault(len(states[j].model_turns) >= cfg.max_turns, []).append((pos, j, kept))
        for last, group in stepping.items():  # Environment.step takes one ``last`` per call
            results = env.step([states[j] for _, j, _ in group], [g.text for _, _, g in group], last)
            for (pos, j, gen), result in zip(group, results, strict=True):
                ids = _add_observation(states[j], bufs[j], gen, result, fmt, cfg)
                if ids is not None:
                    room = cfg.max_tokens - len(bufs[j].tokens)
                    replies[pos] = NextTurn(ids, max(1, min(params.max_new_tokens, room)))
        if on_finished is not None:
            for (j, _), reply in zip(ended, replies, strict=True):
                if reply is None:  # the episode is over: its reward need not wait for the others
                    over[j] = _episode(env, states[j], bufs[j], tokenizer)
                    on_finished(j // n, j % n, over[j])
        return replies

    turn_params = replace(
        params,
        stop=list(dict.fromkeys([*params.stop, *env.stop])),
        include_stop_str_in_output=True,
        max_new_tokens=max(1, min(params.max_new_tokens, cfg.max_tokens)),
    )
    interact = getattr(backend, "interact", None)
    if interact is not None:
        interact(list(prompts), turn_params, respond)
    else:
        interact_by_turns(backend, list(prompts), turn_params, respond)
    episodes = [
        over.get(j) or _episode(env, s, b, tokenizer)
        for j, (s, b) in enumerate(zip(states, bufs, strict=True))
    ]
    if on_finished is not None:  # an episode the backend never ended (none should be): reported now
        for j in sorted(set(range(len(episodes))) - set(over)):
            on_finished(j // n, j % n, episodes[j])
    return [episodes[i * n : (i + 1) * n] for i in range(len(records))]


def _add_turn(
    state: EpisodeState, buf: _Buffer, gen: Generation, tokenizer: Any, max_tokens: int
) -> Generation | None:
    """Appends the model's turn, cut to the episode's budget; returns it, or ``None`` when the turn was cut
    (the episode ends truncated and the environment does not see it)."""
    gen = _within(gen, max_tokens - len(buf.tokens), tokenizer)
    buf.add(gen.token_ids, True, gen.logprobs)
    state.turns.append(Turn("model", gen.text))
    if gen.truncated:
        state.done, state.end = True, END_LENGTH
        return None
    return gen


def _add_observation(
    state: EpisodeState,
    buf: _Buffer,
    gen: Generation,
    reply: StepResult,
    fmt: ObservationFormat,
    cfg: EnvConfig,
) -> list[int] | None:
    """Appends the environment's reply to the turn ``gen`` (loss mask 0) and returns its token ids, or
    ``None`` when the episode ends. An observation that leaves no room for the model to answer ends it
    (``budget``, truncated)."""
    if reply.done or reply.observation is None:
        state.done, state.end = True, reply.end or "done"
        return None
    text = cut_observation(reply.observation, cfg.max_observation_chars)
    ids = fmt.ids(text, bool(gen.token_ids) and gen.token_ids[-1] == fmt.tokenizer.eos_token_id)
    if len(buf.tokens) + len(ids) >= cfg.max_tokens:
        state.done, state.end = True, END_BUDGET
        return None
    buf.add(ids, False, [0.0] * len(ids))
    state.turns.append(Turn("tool", text))
    return ids


def _episode(env: Environment, state: EpisodeState, buf: _Buffer, tokenizer: Any) -> Episode:
    return Episode(
        text=env.answer(state),
        token_ids=buf.tokens,
        prompt_token_ids=buf.prompt,
        logprobs=buf.logprobs,
        finish_reason="length" if state.end in (END_LENGTH, END_BUDGET) else "stop",
        loss_mask=buf.mask,
        state=state,
        transcript=tokenizer.decode(buf.tokens, skip_special_tokens=False),
    )


def answer_in_observations(state: EpisodeState) -> bool | None:
    """Whether a tool's output in the episode held a gold answer: DPR's has-answer (an alias's normalised
    tokens, in order, among the output's) for any alias of the record's reference. For a search agent this is
    retrieval recall, which tells a retrieval failure from a reading failure. ``None`` when the reference
    has no answer text (no reference, or one the ``qa`` verifier cannot read)."""
    try:
        aliases = gold_aliases(state.record.reference)
    except ValueError:
        return None
    seen = "\n".join(t.text for t in state.turns if t.role == "tool")
    return any(has_answer(seen, alias) for alias in aliases) if seen else False


def episode_metrics(summaries: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Turns, tool calls, tool errors by kind, tool time, the share of episodes ending with an answer (and
    each other end), observation tokens, and the share whose observations held the answer (of the episodes
    with an answer text): the ``env/*`` metrics over :meth:`Episode.summary` dicts (a
    step's, or those ``rewardlab eval`` stored; an empty dict for none)."""
    if not summaries:
        return {}
    count = len(summaries)
    calls = sum(s["tool_calls"] for s in summaries)
    errors: Counter = sum((Counter(s["tool_errors"]) for s in summaries), Counter())
    m = {
        "env/turns": statistics.fmean(s["turns"] for s in summaries),
        "env/tool_calls": calls / count,
        "env/tool_call_rate": sum(s["tool_calls"] > 0 for s in summaries) / count,
        "env/tool_error_rate": sum(errors.values()) / max(calls, 1),
        "env/tool_seconds": sum(s["tool_seconds"] for s in summaries),
        "env/answered": sum(s["end"] == END_ANSWER for s in summaries) / count,
        "env/observation_tokens": statistics.fmean(s["observation_tokens"] for s in summaries),
    }
    seen = [s["answer_in_observations"] for s in summaries if s.get("answer_in_observations") is not None]
    if seen:
        m["env/answer_in_observations"] = sum(seen) / len(seen)
    for kind, n in sorted(errors.items()):
        m[f"env/tool_error/{kind}"] = n
    for end, n in sorted(Counter(s["end"] for s in summaries).items()):
        m[f"env/end/{end}"] = n / count
    return m
