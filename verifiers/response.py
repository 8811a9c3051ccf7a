"""The part of a completion that answer readers read: the response after the model's reasoning.

A reasoning model writes a draft inside ``<think>...</think>`` and then its response; every verifier that
reads an answer (math, choice, qa, json) reads only what follows the last ``</think>``, so that an answer
tried and dropped in the draft is never taken for the final one.
"""

from __future__ import annotations

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def response_start(text: str) -> int:
    """Offset where the response starts: after the last ``</think>``, else 0."""
    cut = text.rfind(THINK_CLOSE)
    return cut + len(THINK_CLOSE) if cut >= 0 else 0


def final_response(text: str) -> tuple[int, str | None]:
    """``(start, response)``: the offset and text of what follows the last ``</think>`` (the whole text when
    there is none); the response is ``None`` when a ``<think>`` is opened and never closed (the completion
    stopped inside its reasoning)."""
    start = response_start(text)
    if start == 0 and THINK_OPEN in text:
        return 0, None
    return start, text[start:]


__all__ = ["THINK_CLOSE", "THINK_OPEN", "final_response", "response_start"]
