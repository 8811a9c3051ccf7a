"""Outcome-labelled data for an implicit PRM: rows, their prompt / completion token ids, and the padded
batch in the RL trainer's layout.

Rows (JSONL, JSON, Parquet, CSV or a ``datasets`` name, read by the ORM's loader): ``{"prompt": ...,
"completion": ..., "label": 0/1}`` (a soft label in [0, 1] is kept as it is), or ``"reward"`` instead of
``"label"``: a verifier's score, binarised as PRIME's online update reads it (correct when > 0).

The prompt is tokenised as the RL trainer's rollouts are (the tokenizer's special tokens, or the chat
template's user turn with the assistant turn opened), the completion after it without special tokens and
with EOS appended, so the PRM reads offline rows and the policy's samples alike. A batch is the RL batch's
layout: left-padded prompts, right-padded completions, ``response_mask`` over the last ``T`` columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.rewardmodels.orm.data import load_rows, uses_chat_template
from rewardlab.types import message_text

__all__ = ["OutcomeExample", "collate", "encode_rows", "load_rows", "row_label"]


@dataclass
class OutcomeExample:
    """One tokenised row."""

    prompt_ids: list[int]
    completion_ids: list[int]
    label: float
    """The outcome label in [0, 1] (1: correct)."""


def row_label(row: dict[str, Any]) -> float:
    """A row's outcome label: ``label`` as given (0/1 or soft in [0, 1]), else ``reward > 0`` (PRIME's
    binarisation of a verifier score). Raises ``ValueError`` naming the problem."""
    if row.get("label") is not None:
        label = float(row["label"])
        if not 0.0 <= label <= 1.0:
            raise ValueError(f"label must lie in [0, 1], got {row['label']!r}")
        return label
    if row.get("reward") is not None:
        return 1.0 if float(row["reward"]) > 0 else 0.0
    raise ValueError(f"rows need prompt, completion and label (or reward); got keys {sorted(row)}")


def _prompt_ids(tokenizer: Any, prompt: Any, templated: bool) -> list[int]:
    if templated:
        messages = list(prompt) if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(tokenizer(message_text(prompt, every=True) if prompt else "")["input_ids"])


def encode_rows(
    rows: Sequence[dict[str, Any]],
    tokenizer: Any,
    *,
    use_chat_template: bool | None = None,
    append_eos: bool = True,
    max_length: int | None = None,
) -> tuple[list[OutcomeExample], int]:
    """Tokenised examples and the number dropped for exceeding ``max_length`` (prompt + completion) or for
    an empty prompt or completion (the first response token's log-prob needs a token before it)."""
    templated = uses_chat_template(tokenizer, use_chat_template)
    eos = tokenizer.eos_token_id
    out: list[OutcomeExample] = []
    dropped = 0
    for row in rows:
        if "completion" not in row:
            raise ValueError(f"rows need prompt, completion and label (or reward); got keys {sorted(row)}")
        label = row_label(row)
        completion = list(tokenizer(message_text(row["completion"]), add_special_tokens=False)["input_ids"])
        if append_eos and eos is not None:
            completion.append(eos)
        prompt = _prompt_ids(tokenizer, row.get("prompt"), templated)
        if not prompt or not completion or (max_length and len(prompt) + len(completion) > max_length):
            dropped += 1
            continue
        out.append(OutcomeExample(prompt, completion, label))
    return out, dropped


def collate(examples: Sequence[OutcomeExample], pad_id: int) -> dict[str, Any]:
    """``input_ids`` / ``attention_mask`` ``(B, P + T)`` (prompts left-padded, completions right-padded),
    ``response_mask`` ``(B, T)`` and ``labels`` ``(B,)``: the RL trainer's batch layout."""
    import torch

    width_p = max(len(e.prompt_ids) for e in examples)
    width_t = max(len(e.completion_ids) for e in examples)
    ids, att, resp = [], [], []
    for e in examples:
        pad_p, pad_t = width_p - len(e.prompt_ids), width_t - len(e.completion_ids)
        ids.append([pad_id] * pad_p + e.prompt_ids + e.completion_ids + [pad_id] * pad_t)
        att.append([0] * pad_p + [1] * (len(e.prompt_ids) + len(e.completion_ids)) + [0] * pad_t)
        resp.append([1.0] * len(e.completion_ids) + [0.0] * pad_t)
    return {
        "input_ids": torch.tensor(ids, dtype=torch.long),
        "attention_mask": torch.tensor(att, dtype=torch.long),
        "response_mask": torch.tensor(resp, dtype=torch.float32),
        "labels": torch.tensor([e.label for e in examples], dtype=torch.float32),
    }
