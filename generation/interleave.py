"""The hf backend's multi-turn decoding loop: all episodes of a rollout decode in one batch, and an episode
whose turn ends starts its next turn at once (vLLM's continuous batching, for transformers models).

A rollout that calls ``generate`` once per turn waits at every turn for the batch's longest turn, so each
turn costs a whole single-turn sample. Here each row of the batch is one episode with its own pending
tokens: while it decodes, the token it sampled last; when it starts a turn, its prompt, or its turn's last
token and the environment's reply. A step feeds every row's pending tokens in one forward pass,
right-aligned in a ``(rows, width)`` block (padding on the left where a row feeds fewer; the attention mask
hides it, position ids count each row's real tokens), into one transformers ``DynamicCache``.

* A step costs as wide as its widest row, so pending tokens are fed in chunks (chunked prefill): a step
  is as wide as the most tokens a row feeds, chosen so that at least half of the step's positions are real
  (one token while most rows decode: a long reply rides along with their steps; a whole wave of replies
  at once), and at most ``step_tokens`` positions. A row samples once its pending tokens are all in.
* A row whose episode is over leaves the batch; a waiting episode takes its place (``batch_size`` rows at
  most). When the cache's padding columns outgrow its real ones, each row's real columns are moved to the
  right, in order (compaction).
* A turn ends on EOS, on a stop string (transformers' ``StopStringCriteria`` on the row's last tokens) or at
  its token limit, and is cut as ``generate``'s samples are (:meth:`HFBackend._finish_sample`); tokens fed
  past the cut are masked out of the cache.
* Sampling applies exactly the :class:`SamplingParams` (temperature, top-k, top-p with transformers'
  warpers; greedy at temperature 0), as vLLM does; a model's own ``generation_config`` is not read. The
  log-probability of each sampled token is ``log_softmax(logits / temperature)``, before truncation.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from rewardlab.generation.base import Generation, NextTurn, Respond, SamplingParams

FILL = 0.5
"""The least share of a step's positions that are real tokens (the rest is padding), when it feeds more than
one token per row."""


@dataclass(eq=False)
class _Row:
    episode: int
    context: list[int]
    """The episode's tokens before this turn."""
    pending: list[int]
    """Tokens to feed before the next sample."""
    limit: int
    """This turn's token limit."""
    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    cols: list[int] = field(default_factory=list)
    """The cache column of each of this turn's tokens fed so far."""
    real: int = 0
    """Real (unmasked) tokens in the cache: the next position id."""

    @property
    def decoding(self) -> bool:
        return len(self.pending) == 1 and bool(self.tokens)


class TurnLoop:
    """One rollout of multi-turn episodes (see the module docstring); ``run`` drives it to the end."""

    def __init__(
        self, backend: Any, params: SamplingParams, respond: Respond, *, batch_size: int, step_tokens: int
    ) -> None:
        self.backend = backend
        self.model = backend.model
        self.params = params
        self.respond = respond
        self.batch_size = batch_size
        self.step_tokens = step_tokens
        self.device = next(self.model.parameters()).device
        self.rows: list[_Row] = []
        self.cache: Any = None
        self.mask = torch.zeros(0, 0, dtype=torch.long)
        self.warpers = _warpers(params)
        self.stops = stop_criteria(backend.tokenizer, params.stop)
        self.limits: dict[int, SamplingParams] = {}
        """The sampling parameters of a turn, by its token limit (how :meth:`_cut` reads them)."""
        self.eos = torch.tensor(sorted(backend.eos_ids), dtype=torch.long)
        self.tails = torch.zeros(0, self.stops.maximum_token_len if self.stops else 0, dtype=torch.long)
        """Each row's last tokens, context included, as the stop-string check reads them."""

    def run(self, prompts: Sequence[list[int]]) -> None:
        """Runs ``params.n`` episodes of each prompt (episode ``i * n + k``) until every one is over."""
        n = max(1, int(self.params.n))
        waiting = deque((i * n + k, list(ids)) for i, ids in enumerate(prompts) for k in range(n))
        first = True
        while self.rows or waiting:
            room = min(len(waiting), self.batch_size - len(self.rows))
            if room > 0:
                admitted = [waiting.popleft() for _ in range(room)]
                self._admit([_Row(e, ids, list(ids), self.params.max_new_tokens) for e, ids in admitted])
            if first and n > 1:
                self._share_prompts(n)
            first = False
            ready, logits = self._feed()
            tokens = self._sample(ready, logits)
            self._end_turns(self._turns_over(ready, tokens))
            self._compact()

    # -- the batch ------------------------------------------------------------------------------------

    def _admit(self, rows: list[_Row]) -> None:
        """Adds rows with no cache columns of their own (their whole width masked)."""
        self.rows += rows
        self.mask = torch.cat([self.mask, self.mask.new_zeros(len(rows), self.mask.shape[1])])
        self.tails = torch.cat([self.tails, *(self._tail(row.context)[None] for row in rows)])
        if self.cache is not None:
            for layer in self.cache.layers:
                layer.keys = torch.cat([layer.keys, layer.keys.new_zeros(len(rows), *layer.keys.shape[1:])])
                layer.values = torch.cat(
                    [layer.values, layer.values.new_zeros(len(rows), *layer.values.shape[1:])]
                )

    def _share_prompts(self, n: int) -> None:
        """Prefills each distinct prompt of the first rows once, all but its last token, and repeats its cache
        for its samples (``generate``'s shared prefix, :meth:`HFBackend._shared_prompt_cache`)."""
        prompts = [row.pending for row in self.rows]
        input_ids, attention_mask = self.backend._left_padded(prompts)
        if input_ids.shape[1] < 2:
            return
        keys = [row.episode // n for row in self.rows]
        cache = self.backend._shared_prompt_cache(input_ids, attention_mask, keys, self.device)
        if cache is None:
            return
        self.cache, self.mask = cache, attention_mask[:, :-1].clone()
        for row, ids in zip(self.rows, prompts, strict=True):
            row.real, row.pending = len(ids) - 1, ids[-1:]

    def _drop(self, gone: set[int]) -> None:
        keep = [i for i, r in enumerate(self.rows) if id(r) not in gone]
        self.rows = [self.rows[i] for i in keep]
        index = torch.tensor(keep, dtype=torch.long)
        self.mask, self.tails = self.mask.index_select(0, index), self.tails.index_select(0, index)
        if self.cache is not None:
            index = index.to(self.device)
            for layer in self.cache.layers:
                layer.keys, layer.values = (
                    layer.keys.index_select(0, index),
                    layer.values.index_select(0, index),
                )

    def _compact(self) -> None:
        """Moves each row's real cache columns to the right, in order, once padding outgrows them."""
        if self.cache is None or not self.rows:
            return
        width = self.mask.shape[1]
        counts = self.mask.sum(1)
        kept = int(counts.max())
        if width - kept < max(16, kept // 2):
            return
        order = torch.sort(self.mask, dim=1, stable=True).indices[:, width - kept :]
        position = self.mask.cumsum(1)  # a real column's rank in its row, from 1
        for r, row in enumerate(self.rows):
            row.cols = [kept - int(counts[r]) + int(position[r, c]) - 1 for c in row.cols]
        self.mask = self.mask.gather(1, order)
        index = order.to(self.device)
        for layer in self.cache.layers:
            heads, dim = layer.keys.shape[1], layer.keys.shape[3]
            gather = index[:, None, :, None].expand(-1, heads, -1, dim)
            layer.keys, layer.values = layer.keys.gather(2, gather), layer.values.gather(2, gather)

    # -- one step ------------------------------------------------------------------------------------

    def _feed(self) -> tuple[list[int], torch.Tensor]:
        """Runs one forward pass over every row's next pending tokens (:meth:`_width` at most; the first
        step whole prompts); returns the indices of the rows that fed all they had, and the logits at their
        last positions."""
        cap = self._width() if self.cache is not None else None
        feeds = [row.pending[:cap] for row in self.rows]
        width, start, pad = max(map(len, feeds)), self.mask.shape[1], self.backend.pad_id
        ids, starts, ready = [], [], []
        for r, (row, feed) in enumerate(zip(self.rows, feeds, strict=True)):
            if row.decoding:
                row.cols.append(start + width - 1)
            ids.append([pad] * (width - len(feed)) + feed if len(feed) < width else feed)
            starts.append(row.real - width + len(feed))  # the position id of column 0 (padding: masked)
            row.real += len(feed)
            row.pending = row.pending[len(feed) :]
            if not row.pending:
                ready.append(r)
        ids_t = torch.tensor(ids)
        lengths = torch.tensor([len(f) for f in feeds])
        feed_mask = (torch.arange(width)[None, :] >= (width - lengths)[:, None]).long()
        positions = (torch.tensor(starts)[:, None] + torch.arange(width)[None, :]) * feed_mask
        self.mask = torch.cat([self.mask, feed_mask], dim=1)
        if self.cache is None:
            self.cache = self.backend._new_cache()
        out = self.model(
            input_ids=ids_t.to(self.device),
            attention_mask=self.mask.to(self.device),
            position_ids=positions.to(self.device),
            use_cache=True,
            logits_to_keep=1,
            **{self.backend._cache_kw: self.cache},
        )
        index = torch.tensor(ready, dtype=torch.long, device=self.device)
        return ready, out.logits[index, -1].float()

    def _width(self) -> int:
        """The widest feed of this step: the most tokens per row that keeps ``FILL`` of the positions real
        and ``step_tokens`` in all (at least 1)."""
        pending = [len(row.pending) for row in self.rows]
        best = 1
        for width in sorted(set(pending)):
            if width * len(pending) > self.step_tokens:
                break
            if sum(min(p, width) for p in pending) >= FILL * width * len(pending):
                best = width
        return best

    def _sample(self, ready: list[int], logits: torch.Tensor) -> torch.Tensor:
        """Samples the next token of each ready row (``logits`` in the same order), records it and its
        log-prob, and returns the tokens."""
        if not ready:
            return torch.zeros(0, dtype=torch.long)
        p = self.params
        scores = logits if p.temperature <= 0 else logits / p.temperature
        logprobs = torch.log_softmax(scores, dim=-1)
        if p.temperature <= 0:
            tokens = logits.argmax(-1)
        else:
            for warp in self.warpers:
                scores = warp(None, scores)
            tokens = _draw(torch.softmax(scores, dim=-1) if self.warpers else logprobs.exp())
        chosen = logprobs.gather(-1, tokens[:, None]).squeeze(-1).tolist()
        for r, token, lp in zip(ready, tokens.tolist(), chosen, strict=True):
            row = self.rows[r]
            row.tokens.append(token)
            row.logprobs.append(lp)
            row.pending = [token]
        if self.tails.shape[1]:
            index = torch.tensor(ready, dtype=torch.long)
            self.tails[index] = torch.cat([self.tails[index, 1:], tokens.cpu()[:, None]], dim=1)
        return tokens.cpu()

    def _turns_over(self, ready: list[int], tokens: torch.Tensor) -> list[_Row]:
        """The ready rows whose turn ended with the token just sampled (``tokens``): EOS, the turn's limit, or
        a stop string completed at the end of the row's tokens."""
        if not ready:
            return []
        rows = [self.rows[r] for r in ready]
        over = torch.isin(tokens, self.eos) | torch.tensor([len(row.tokens) >= row.limit for row in rows])
        if self.stops is not None:
            over |= self.stops(self.tails[torch.tensor(ready, dtype=torch.long)], None)
        return [rows[i] for i in over.nonzero().flatten().tolist()]

    def _tail(self, ids: list[int]) -> torch.Tensor:
        """The last tokens of ``ids`` that the stop-string check reads, padded on the left."""
        k = self.tails.shape[1]
        tail = ids[-k:] if k else []
        return torch.tensor([self.backend.pad_id] * (k - len(tail)) + tail, dtype=torch.long)

    def _end_turns(self, ended: list[_Row]) -> None:
        """Cuts each ended turn as ``generate``'s samples are cut, asks ``respond`` how each episode goes on,
        and starts the next turns (or drops the rows whose episodes are over)."""
        if not ended:
            return
        where = {id(row): r for r, row in enumerate(self.rows)}
        gens = [self._cut(row, where[id(row)]) for row in ended]
        replies = self.respond([(row.episode, gen) for row, gen in zip(ended, gens, strict=True)])
        gone = set()
        for row, gen, reply in zip(ended, gens, replies, strict=True):
            if reply is None:
                gone.add(id(row))
            else:
                self._next_turn(row, gen, reply)
                if self.tails.shape[1]:
                    self.tails[where[id(row)]] = self._tail(row.context)
        if gone:
            self._drop(gone)

    def _cut(self, row: _Row, r: int) -> Generation:
        if row.limit not in self.limits:
            self.limits[row.limit] = replace(self.params, max_new_tokens=row.limit)
        gen = self.backend._finish_sample(row.tokens, row.context, row.logprobs, self.limits[row.limit])
        kept = len(gen.token_ids)
        if kept < len(row.tokens):  # tokens past the cut were fed: mask them out, feed the last kept again
            masked = row.cols[max(kept - 1, 0) :]
            self.mask[r, masked] = 0
            row.real -= len(masked)
            row.tokens = row.tokens[:kept]
        return gen

    def _next_turn(self, row: _Row, gen: Generation, reply: NextTurn) -> None:
        row.context = row.context + list(gen.token_ids) + list(reply.ids)
        row.pending = (list(gen.token_ids[-1:]) if gen.token_ids else []) + list(reply.ids)
        if not row.pending:  # no kept token and no reply: nothing to feed, so no next sample
            raise ValueError("a turn that kept no token continues with no reply tokens")
        row.tokens, row.logprobs, row.cols, row.limit = [], [], [], reply.max_new_tokens


def _warpers(params: SamplingParams) -> list[Any]:
    """transformers' top-k and top-p warpers, in ``generate``'s order (after the temperature, which
    :meth:`TurnLoop._sample` applies itself)."""
    from transformers import TopKLogitsWarper, TopPLogitsWarper

    if params.temperature <= 0:
        return []
    warpers: list[Any] = []
    if params.top_k > 0:
        warpers.append(TopKLogitsWarper(params.top_k))
    if params.top_p < 1.0:
        warpers.append(TopPLogitsWarper(params.top_p))
    return warpers


def _draw(probs: torch.Tensor) -> torch.Tensor:
    """One token per row of ``probs``, by inversion of its cumulative sum with one uniform draw (on CPU,
    ``torch.multinomial`` draws a number per vocabulary entry); a zero-probability token is never drawn."""
    cdf = probs.cumsum(-1)
    u = torch.rand(len(probs), 1, device=probs.device, dtype=cdf.dtype) * cdf[:, -1:]
    tokens = torch.searchsorted(cdf, u, right=True).squeeze(1)
    return torch.where(tokens < probs.shape[-1], tokens, probs.argmax(-1))  # u rounded up to the total


def stop_criteria(tokenizer: Any, stops: Sequence[str]) -> Any:
    """transformers' stop-string test for ``stops`` (``None`` without any): the loop's and the hf backend's."""
    if not stops:
        return None
    from transformers import StopStringCriteria

    return StopStringCriteria(tokenizer=tokenizer, stop_strings=list(stops))
