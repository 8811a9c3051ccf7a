"""How many items go into the next chunk of work, from the time earlier items took (the local worker pool
and the Ray driver size their chunks the same way)."""

from __future__ import annotations


class ChunkSizer:
    """Chunk sizes from the time items took so far: about ``target_s`` of work per chunk, ``first`` items
    before any time is known, between 1 and ``most`` (the local pool and the Ray driver both use it)."""

    def __init__(self, target_s: float, first: int, most: int) -> None:
        self.target_s, self.first, self.most = target_s, first, most
        self.per_item: float | None = None

    def observe(self, seconds: float, items: int) -> None:
        """Records a chunk of ``items`` that took ``seconds`` (a running mean that halves old evidence)."""
        seen = seconds / max(1, items)
        self.per_item = seen if self.per_item is None else 0.5 * (self.per_item + seen)

    def size(self) -> int:
        if self.per_item is None:
            return max(1, min(self.first, self.most))
        return max(1, min(self.most, int(self.target_s / max(self.per_item, 1e-6))))
