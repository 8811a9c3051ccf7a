"""The hf backend's prefix cache: the KV cache of each finished sample, kept so that a later prompt that
extends the sample's tokens (the next turn of a multi-turn episode: the sample, then the tool's output)
prefills only what is new, as vLLM's automatic prefix caching does.

With ``branching`` (a tree rollout), entries are kept after use and a prompt may also reuse the start of
a longer entry: a branch's prompt is the sample's prompt and its first tokens, continued several times.

A :class:`PrefixStore` lives for one rollout (``HFBackend.prefix_cache()``): the policy's weights change
between rollouts and its keys and values with them. Each stored entry is the keys and values of one
sample's real tokens (no padding), per layer, keyed by those tokens; a lookup finds the longest entry that
is a prefix of a prompt by comparing rolling hashes of the prompt's prefixes (one pass over the prompt)
and then the tokens themselves. Only caches of plain attention layers (transformers' ``DynamicLayer``) are
kept; a model with sliding-window, linear or recurrent layers prefills every prompt whole, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

_MASK = (1 << 61) - 1
_BASE = 1_000_003


def _prefix_hashes(tokens: Sequence[int]) -> list[int]:
    """``out[k]``: the hash of ``tokens[:k]``, for every ``k`` from 0 to ``len(tokens)``."""
    out, h = [0], 0
    for tok in tokens:
        h = (h * _BASE + tok + 1) & _MASK
        out.append(h)
    return out


@dataclass
class _Entry:
    tokens: tuple[int, ...]
    layers: list[tuple[torch.Tensor, torch.Tensor]]
    """Per layer, keys and values ``(heads, len(tokens), head_dim)``."""

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.layers)


@dataclass
class Prefix:
    """What a prompt reuses: its first ``length`` tokens' keys and values (``entry``), or nothing."""

    length: int = 0
    entry: _Entry | None = None


def reusable(cache: Any) -> bool:
    """Whether ``cache`` (a transformers ``Cache``) holds plain per-token keys and values in every layer."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


class PrefixStore:
    """Finished samples' keys and values, for the prompts that extend them (see the module docstring).

    Entries are taken by the lookup that uses them: a sample's tokens are continued once, by its next turn.
    With ``branching`` they stay, and every prefix of an entry is found too (indexed by the hash of each of
    its prefixes). ``max_bytes`` bounds what is kept; samples past it are not stored, and their next turn
    prefills whole.
    """

    def __init__(self, max_bytes: int, *, branching: bool = False) -> None:
        self.max_bytes = max_bytes
        self.branching = branching
        self.nbytes = 0
        self._entries: dict[tuple[int, int], list[_Entry]] = {}
        self._lengths: set[int] = set()
        self._starts: dict[tuple[int, int], _Entry] = {}  # branching: (length, hash) of every entry prefix

    def __len__(self) -> int:
        return sum(len(v) for v in self._entries.values())

    def take(self, prompt: Sequence[int]) -> Prefix:
        """The longest stored prefix of ``prompt`` that leaves at least its last token to run (removed from
        the store), or an empty :class:`Prefix`."""
        if not self._entries or len(prompt) < 2:
            return Prefix()
        hashes = _prefix_hashes(prompt)
        if self.branching:
            return self._longest_start(prompt, hashes)
        for length in sorted((n for n in self._lengths if n <= len(prompt)), reverse=True):
            bucket = self._entries.get((length, hashes[length]), [])
            for i, entry in enumerate(bucket):
                if entry.tokens == tuple(prompt[:length]):
                    del bucket[i]
                    self.nbytes -= entry.nbytes
                    return Prefix(min(length, len(prompt) - 1), entry)
        return Prefix()

    def _longest_start(self, prompt: Sequence[int], hashes: list[int]) -> Prefix:
        """Branching: the longest ``length < len(prompt)`` whose first tokens some entry starts with."""
        for length in range(len(prompt) - 1, 0, -1):
            entry = self._starts.get((length, hashes[length]))
            if entry is not None and entry.tokens[:length] == tuple(prompt[:length]):
                return Prefix(length, entry)
        return Prefix()

    def put(self, tokens: Sequence[int], layers: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        entry = _Entry(tuple(tokens), layers)
        if len(tokens) < 1 or self.nbytes + entry.nbytes > self.max_bytes:
            return
        hashes = _prefix_hashes(tokens)
        self._entries.setdefault((len(tokens), hashes[-1]), []).append(entry)
        self._lengths.add(len(tokens))
        self.nbytes += entry.nbytes
        if self.branching:
            for length in range(1, len(tokens) + 1):
                self._starts.setdefault((length, hashes[length]), entry)

    def store_rows(self, cache: Any, full_mask: torch.Tensor, rows: Sequence[Sequence[int]]) -> None:
        """Keeps each row's keys and values after ``generate``: ``rows[r]`` is the sample's tokens (its prompt,
        then the new tokens it kept), ``full_mask`` ``(B, width + new)`` marks the row's real positions (the
        prompt's mask, then the new tokens). The last new token has no keys yet, so it is left out."""
        layers = cache.layers
        cached = layers[0].keys.shape[2]
        for r, tokens in enumerate(rows):
            positions = full_mask[r, :cached].nonzero().squeeze(-1)
            count = min(len(tokens), len(positions))
            positions = positions[:count].to(layers[0].keys.device)
            self.put(
                tokens[:count], [(lay.keys[r][:, positions], lay.values[r][:, positions]) for lay in layers]
            )


def batched_cache(prefixes: Sequence[Prefix]) -> tuple[Any, int]:
    """A transformers ``DynamicCache`` of the ``prefixes``, one row each, right-aligned in a common width
    (zeros before a shorter one; the attention mask hides them), and that width."""
    from transformers import DynamicCache

    width = max(p.length for p in prefixes)
    sample = next(p.entry for p in prefixes if p.entry is not None)
    layers = []
    for layer, (key0, _) in enumerate(sample.layers):
        heads, _, dim = key0.shape
        keys = key0.new_zeros(len(prefixes), heads, width, dim)
        values = keys.clone()
        for row, prefix in enumerate(prefixes):
            if prefix.entry is not None and prefix.length:
                key, value = prefix.entry.layers[layer]
                keys[row, :, width - prefix.length :] = key[:, : prefix.length]
                values[row, :, width - prefix.length :] = value[:, : prefix.length]
        layers.append((keys, values))
    cache = DynamicCache(layers)
    return cache, width
