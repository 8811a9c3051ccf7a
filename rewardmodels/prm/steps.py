"""Splitting a solution into reasoning steps, and locating each step's end in characters and in tokens.

A process reward model scores every step of a solution. Steps are marked in one of three ways:

* a **step tag** written after each step, as Math-Shepherd does (``"Step 1: ... ки\\nStep 2: ... ки"``):
  the text before each tag is a step, the tag itself is removed;
* a **separator** between steps (default ``"\\n"``, as TRL's ``PRMTrainer``); empty steps are dropped, so
  solutions whose steps are separated by blank lines (``"\\n\\n"``, as ProcessBench and Qwen's PRMs) split
  the same way;
* an explicit list of steps (``record.metadata["steps"]`` or a ``completions`` list in training data).

:func:`split_steps` returns the steps together with the character offset in the original text where each
step ends, so that step rewards can be placed on the last token of each step (RL with per-step rewards),
and :func:`char_to_token_index` maps such offsets onto any token sequence.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: The step tag of Math-Shepherd (Wang et al., 2024): a Cyrillic "ки" written after every step.
MATH_SHEPHERD_TAG = "ки"


@dataclass
class Steps:
    """A solution split into steps.

    Attributes:
        steps: The step texts, stripped of surrounding whitespace and of the step tag.
        ends: For each step, the character offset in the original text just past the step's last
            non-space character (exclusive end). ``text[:ends[i]]`` is the solution through step ``i``.
        starts: For each step, the character offset of its first non-space character.
    """

    steps: list[str] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.steps)


def _stripped_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def split_steps(text: str, *, separator: str = "\n", step_tag: str | None = MATH_SHEPHERD_TAG) -> Steps:
    """Splits ``text`` into steps.

    When ``step_tag`` is set and occurs in ``text``, each tag ends a step (Math-Shepherd style); text after
    the last tag, if not blank, is one more step. Otherwise the text is split on ``separator``. Blank steps
    are dropped in both cases.

    Args:
        text: The solution.
        separator: What separates steps when the text carries no tag.
        step_tag: The tag that ends a step (``None`` to never look for one).
    """
    if not separator:
        raise ValueError("separator must be a non-empty string")
    delimiter = step_tag if step_tag and step_tag in text else separator
    result = Steps()
    start = 0
    while start <= len(text):
        pos = text.find(delimiter, start)
        end = len(text) if pos < 0 else pos
        s, e = _stripped_span(text, start, end)
        if e > s:
            result.steps.append(text[s:e])
            result.starts.append(s)
            result.ends.append(e)
        if pos < 0:
            break
        start = pos + len(delimiter)
    return result


def steps_from_list(steps: Sequence[str], *, joiner: str = "\n") -> tuple[str, Steps]:
    """Joins given steps with ``joiner`` into one text and returns it with the steps' offsets in it."""
    parts: list[str] = []
    result = Steps()
    offset = 0
    for i, step in enumerate(steps):
        if i:
            parts.append(joiner)
            offset += len(joiner)
        step = str(step)
        result.steps.append(step.strip())
        s, e = _stripped_span(step, 0, len(step))
        result.starts.append(offset + s)
        result.ends.append(offset + e)
        parts.append(step)
        offset += len(step)
    return "".join(parts), result


def record_steps(record: Any, *, separator: str = "\n", step_tag: str | None = MATH_SHEPHERD_TAG) -> Steps:
    """The steps of a :class:`~rewardlab.types.Record`: ``metadata["steps"]`` when given (offsets are then
    found in the completion text by search, or -1 when a step is not in it), else the completion split by
    :func:`split_steps`."""
    text = record.completion_text
    given = (record.metadata or {}).get("steps")
    if given:
        result = Steps()
        cursor = 0
        for step in given:
            step = str(step).strip()
            pos = text.find(step, cursor) if step else -1
            result.steps.append(step)
            if pos < 0:
                result.starts.append(-1)
                result.ends.append(-1)
            else:
                result.starts.append(pos)
                result.ends.append(pos + len(step))
                cursor = pos + len(step)
        return result
    return split_steps(text, separator=separator, step_tag=step_tag)


def char_to_token_index(tokenizer: Any, token_ids: Sequence[int], char_ends: Sequence[int]) -> list[int]:
    """For each character offset in ``char_ends``, the index of the token of ``token_ids`` that holds the
    character just before it (the last token of a step that ends there).

    Works for any tokenizer by decoding prefixes (``len(decode(ids[:i+1]))`` grows with ``i``) and a binary
    search per offset, so it needs only ``O(len(char_ends) * log(len(token_ids)))`` decodes. It is how a
    per-step reward found in the completion's text lands on the step's last *generated* token, whether or
    not re-tokenising the text would give the same ids. Offsets ``<= 0`` map to ``-1``; offsets past the
    decoded text map to the last token.
    """
    ids = list(token_ids)
    if not ids:
        return [-1 for _ in char_ends]
    cache: dict[int, int] = {}

    def decoded_len(i: int) -> int:  # length of the text of ids[: i + 1]
        if i not in cache:
            cache[i] = len(tokenizer.decode(ids[: i + 1], skip_special_tokens=True))
        return cache[i]

    class _Lens:
        def __len__(self) -> int:
            return len(ids)

        def __getitem__(self, i: int) -> int:
            return decoded_len(i)

    lens = _Lens()
    out = []
    for end in char_ends:
        if end <= 0:
            out.append(-1)
            continue
        idx = bisect.bisect_left(lens, end)  # first i with decoded_len(i) >= end
        out.append(min(idx, len(ids) - 1))
    return out


__all__ = [
    "MATH_SHEPHERD_TAG",
    "Steps",
    "char_to_token_index",
    "record_steps",
    "split_steps",
    "steps_from_list",
]
