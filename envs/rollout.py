"""Multi-turn rollouts: every episode of a batch advances one turn per backend call.

Turn 1 samples ``n`` episodes per prompt in one call (the prompt is shared, as in single-turn rollouts);
each later turn sends every running episode's whole context as token ids, so the policy's own tokens are
never re-tokenized and the trainer's forward pass sees exactly what the sampler saw. Between turns the
environment answers all episodes at once (``Environment.step``), and each observation is tokenized and
appended with loss mask 0.

An episode comes back as one :class:`Episode`, a :class:`~rewardkit.rl.rollout.Generation` whose
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

from rewardkit.envs.base import END_BUDGET, END_LENGTH, Environment, EpisodeState, Turn
from rewardkit.envs.config import EnvConfig
from rewardkit.rl.rollout.base import Generation, Prompt, RolloutBackend, SamplingParams
from rewardkit.types import Record

_ASSISTANT = "\x00rk-assistant\x00"
_OUTPUT = "\x00rk-output\x00"


@dataclass
class Episode(Generation):
    """One episode as one sample (see the module docstring)."""

    state: EpisodeState | None = None
    """Transcript, counters and why it ended."""
    transcript: str = ""
    """Everything after the prompt, decoded: the model's turns and the observations."""


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
    truncated: bool = False

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
) -> list[list[Episode]]:
    """``params.n`` episodes of each record (prompt ``prompts[i]``), batched per turn; outer list: records,
    inner: episodes. ``params.max_new_tokens`` limits each turn, ``cfg.max_tokens`` the whole episode;
    ``chat``: the prompts use the chat template (observations as tool messages with ``observation_format:
    auto``)."""
    n = max(1, int(params.n))
    states = [env.reset(record) for record in records for _ in range(n)]
    bufs: list[_Buffer] = []
    fmt = ObservationFormat(
        tokenizer,
        cfg.observation_template,
        cfg.observation_format == "chat" or (cfg.observation_format == "auto" and chat),
    )
    eos = tokenizer.eos_token_id
    turn_params = replace(
        params, stop=list(dict.fromkeys([*params.stop, *env.stop])), include_stop_str_in_output=True
    )
    active = list(range(len(states)))
    for turn in range(1, cfg.max_turns + 1):
        if not active:
            break
        budgets = [cfg.max_tokens - len(bufs[j].tokens) if bufs else cfg.max_tokens for j in active]
        p = replace(
            turn_params,
            max_new_tokens=max(1, min(params.max_new_tokens, max(budgets))),
            seed=None if params.seed is None else params.seed + 7919 * (turn - 1),
        )
        if turn == 1:  # n episodes per prompt: the backend shares the prompt's prefill
            gens = [g for group in backend.generate(list(prompts), p) for g in group]
            bufs = [_Buffer(list(g.prompt_token_ids)) for g in gens]
        else:
            gens = [g[0] for g in backend.generate([bufs[j].context for j in active], replace(p, n=1))]
        stepping = []
        for j, gen, budget in zip(active, gens, budgets, strict=True):
            gen = _within(gen, budget, tokenizer)
            bufs[j].add(gen.token_ids, True, gen.logprobs)
            states[j].turns.append(Turn("model", gen.text))
            if gen.truncated:
                _end(states[j], bufs[j], END_LENGTH)
            else:
                stepping.append((j, gen))
        replies = env.step(
            [states[j] for j, _ in stepping], [g.text for _, g in stepping], turn == cfg.max_turns
        )
        active = []
        for (j, gen), reply in zip(stepping, replies, strict=True):
            if reply.done or reply.observation is None:
                states[j].done, states[j].end = True, reply.end or "done"
                continue
            text = cut_observation(reply.observation, cfg.max_observation_chars)
            ids = fmt.ids(text, bool(gen.token_ids) and gen.token_ids[-1] == eos)
            if len(bufs[j].tokens) + len(ids) >= cfg.max_tokens:  # no room left for the model to answer
                _end(states[j], bufs[j], END_BUDGET)
                continue
            bufs[j].add(ids, False, [0.0] * len(ids))
            states[j].turns.append(Turn("tool", text))
            active.append(j)
    episodes = [_episode(env, state, buf, tokenizer) for state, buf in zip(states, bufs, strict=True)]
    return [episodes[i * n : (i + 1) * n] for i in range(len(records))]


def _end(state: EpisodeState, buf: _Buffer, why: str) -> None:
    state.done, state.end, buf.truncated = True, why, True


def _episode(env: Environment, state: EpisodeState, buf: _Buffer, tokenizer: Any) -> Episode:
    return Episode(
        text=env.answer(state),
        token_ids=buf.tokens,
        prompt_token_ids=buf.prompt,
        logprobs=buf.logprobs,
        finish_reason="length" if buf.truncated else "stop",
        loss_mask=buf.mask,
        state=state,
        transcript=tokenizer.decode(buf.tokens, skip_special_tokens=False),
    )


def episode_metrics(episodes: Sequence[Generation]) -> dict[str, float]:
    """Turns, tool calls, tool errors by kind, tool time, the share of episodes ending with an answer (and
    each other end), and observation tokens: the ``env/*`` metrics of a step (an empty dict for
    single-turn samples)."""
    states = [e.state for e in episodes if isinstance(e, Episode) and e.state is not None]
    if not states:
        return {}
    calls = sum(s.tool_calls for s in states)
    errors: Counter = sum((s.tool_errors for s in states), Counter())
    m = {
        "env/turns": statistics.fmean(len(s.model_turns) for s in states),
        "env/tool_calls": calls / len(states),
        "env/tool_call_rate": sum(s.tool_calls > 0 for s in states) / len(states),
        "env/tool_error_rate": sum(errors.values()) / max(calls, 1),
        "env/tool_seconds": sum(s.tool_seconds for s in states),
        "env/answered": sum(s.answered for s in states) / len(states),
        "env/observation_tokens": statistics.fmean(
            len(e.loss_mask or []) - sum(e.loss_mask or []) for e in episodes if isinstance(e, Episode)
        ),
    }
    for kind, count in sorted(errors.items()):
        m[f"env/tool_error/{kind}"] = count
    for end, count in sorted(Counter(s.end for s in states).items()):
        m[f"env/end/{end}"] = count / len(states)
    return m
