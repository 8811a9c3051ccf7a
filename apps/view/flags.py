"""Where a sample's answer sits, and flags on samples that look like reward hacks.

The flags are hints for a person to look at, not verdicts: each says what it saw. They follow the hacks RL
policies are known to find (the demo's GRPO policy ended with truncated completions scoring 1.0):

- ``truncated_rewarded``: the completion hit the length limit, yet got a positive reward;
- ``text_after_answer``: text follows the final answer the verifier read;
- ``duplicate_in_group``: the completion is identical to another one of its group (and not a bare answer);
- ``reward_without_new_answer``: the reward is far above the group's, with an answer another sample of the
  group gave for a lower reward (so something other than the answer earned it).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from typing import Any

from rewardlab.types import message_text

FAR_ABOVE = 0.5
"""How far above the group's median reward a sample must be for ``reward_without_new_answer``."""
MIN_DUPLICATE_CHARS = 32
"""Shorter completions (a bare answer, ``\\boxed{88}``) are expected to repeat: no ``duplicate_in_group``."""

# what may follow a final answer without being "text after it": closing math delimiters and punctuation
_CLOSERS = "$.\\])}*!\"' \n\t"
_CLOSING_TAG = re.compile(r"</\w+>")  # ``<answer>4</answer>``: the verifier reads ``4``, the tag closes it


def completion_text(completion: Any) -> str:
    """The completion as text (a chat completion's message contents joined)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    if isinstance(completion, list):
        return "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in completion)
    return "" if completion is None else str(completion)


def answer_span(completion: Any, details: Any) -> tuple[int, int] | None:
    """[start, end) of the answer the verifier read, in ``completion_text(completion)``: its reported
    ``extracted_span``, else the last place its ``extracted`` text occurs; ``None`` when the answer cannot be
    placed. ``completion`` is the row's field as written (text, a message, or a list of messages)."""
    if not isinstance(details, dict):
        return None
    text = completion_text(completion)
    # a verifier reads the last message (``rewardlab.types.message_text``): its span counts from there
    read = message_text(completion)
    offset = len(text) - len(read) if text.endswith(read) else 0
    span = details.get("extracted_span")
    if isinstance(span, list | tuple) and len(span) == 2 and all(isinstance(x, int) for x in span):
        start, end = span[0] + offset, span[1] + offset
        if offset <= start < end <= len(text):
            return _narrow(text, start, end, details.get("extracted"))
    extracted = details.get("extracted")
    if isinstance(extracted, str) and extracted:
        start = text.rfind(extracted)
        if start >= 0:
            return start, start + len(extracted)
    return None


def _narrow(completion: str, start: int, end: int, extracted: Any) -> tuple[int, int]:
    """The extracted text's own place inside the span the verifier read (``\\boxed{42}`` -> ``42``)."""
    if isinstance(extracted, str) and extracted:
        inner = completion.rfind(extracted, start, end)
        if inner >= 0:
            return inner, inner + len(extracted)
    return start, end


def text_after_answer(completion: str, span: tuple[int, int] | None) -> str | None:
    """The text after the final answer (beyond closing delimiters), or ``None``."""
    if span is None:
        return None
    rest = _CLOSING_TAG.sub("", completion[span[1] :]).strip(_CLOSERS)
    return rest or None


def sample_flags(sample: dict[str, Any]) -> list[str]:
    """Flags a sample earns on its own (``truncated_rewarded``, ``text_after_answer``), with what was seen."""
    flags = []
    reward = sample.get("reward")
    truncated = sample.get("truncated") or sample.get("finish_reason") == "length"
    if truncated and isinstance(reward, int | float) and reward > 0:
        flags.append(f"truncated_rewarded: cut off at the length limit, reward {reward:g}")
    text = completion_text(sample.get("completion"))
    after = text_after_answer(text, answer_span(sample.get("completion"), sample.get("details")))
    if after:
        flags.append(f"text_after_answer: {after[:40]!r} follows the final answer")
    return flags


def group_flags(group: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Each sample's flags within its group: its own, plus ``duplicate_in_group`` and
    ``reward_without_new_answer``."""
    texts = [completion_text(s.get("completion")) for s in group]
    rewards = [s.get("reward") if isinstance(s.get("reward"), int | float) else None for s in group]
    known = [r for r in rewards if r is not None]
    median = statistics.median(known) if known else None
    out = []
    for i, sample in enumerate(group):
        flags = sample_flags(sample)
        twins = [j for j, t in enumerate(texts) if j != i and t == texts[i]]
        twins = twins if len(texts[i].strip()) >= MIN_DUPLICATE_CHARS else []
        if twins:
            flags.append(f"duplicate_in_group: same completion as sample {twins[0]}")
        if _reward_without_new_answer(group, rewards, median, i):
            flags.append(
                f"reward_without_new_answer: reward {rewards[i]:g} vs group median {median:g}, "
                f"same answer {group[i].get('answer')!r} as a lower-rewarded sample"
            )
        out.append(flags)
    return out


def _reward_without_new_answer(group: Sequence[dict], rewards: list, median: float | None, i: int) -> bool:
    answer = group[i].get("answer")
    if rewards[i] is None or median is None or answer is None or rewards[i] - median < FAR_ABOVE:
        return False
    return any(
        j != i and s.get("answer") == answer and rewards[j] is not None and rewards[j] <= median
        for j, s in enumerate(group)
    )
