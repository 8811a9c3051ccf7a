"""Preference and label data for outcome reward models: reading rows, building texts, tokenising, padding.

Row layouts (JSONL, JSON, Parquet, CSV, or a ``datasets`` name):

* pairwise: ``{"prompt": ..., "chosen": ..., "rejected": ..., ["margin": float], ["subset": str]}``;
  ``prompt`` may be missing when ``chosen`` / ``rejected`` hold whole conversations (message lists);
* pointwise: ``{"prompt": ..., "completion": ..., "label": 0/1 or a float in [0, 1], ["subset": str]}``.

``prompt`` and completions are strings or chat message lists (``[{"role": ..., "content": ...}]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardlab.data.loaders import read_rows
from rewardlab.types import message_text

PAIRWISE_KEYS = ("chosen", "rejected")
POINTWISE_KEYS = ("completion", "label")


def load_rows(path_or_name: str, split: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of a JSONL / JSON / Parquet / CSV file, or of a ``datasets`` dataset (name or saved folder),
    through the shared reader :func:`rewardlab.data.loaders.read_rows`; a dataset's split defaults to
    ``"train"``."""

    default_split = None if Path(path_or_name).is_file() else "train"
    return read_rows(path_or_name, split=split or default_split, limit=limit)


def detect_kind(rows: Sequence[dict[str, Any]]) -> str:
    """``"pairwise"`` when rows have chosen/rejected, ``"pointwise"`` when they have completion/label."""
    if not rows:
        raise ValueError("no rows")
    first = rows[0]
    if all(k in first for k in PAIRWISE_KEYS):
        return "pairwise"
    if all(k in first for k in POINTWISE_KEYS):
        return "pointwise"
    raise ValueError(
        f"rows need 'chosen' and 'rejected' (pairwise) or 'completion' and 'label' (pointwise); "
        f"got keys {sorted(first)}"
    )


def _as_messages(prompt: Any) -> list[dict[str, str]]:
    if prompt is None or prompt == "":
        return []
    if isinstance(prompt, list):
        return [dict(m) for m in prompt]
    if isinstance(prompt, dict):
        return [dict(prompt)]
    return [{"role": "user", "content": str(prompt)}]


def uses_chat_template(tokenizer: Any, use_chat_template: bool | None) -> bool:
    """``None`` means: use it when the tokenizer has one."""
    has = bool(getattr(tokenizer, "chat_template", None))
    if use_chat_template and not has:
        raise ValueError("use_chat_template is set but the tokenizer has no chat template")
    return has if use_chat_template is None else bool(use_chat_template)


def build_text(
    tokenizer: Any,
    prompt: Any,
    completion: Any,
    *,
    use_chat_template: bool | None = None,
    append_eos: bool = True,
) -> tuple[str, bool]:
    """The text the reward model reads for ``(prompt, completion)``; returns ``(text, templated)``.

    With a chat template (``use_chat_template=None``: when the tokenizer has one) the prompt becomes the
    user turn(s) and the completion the assistant turn (a completion given as messages is appended as is).
    Without one, the text is ``prompt + completion`` (as TRL concatenates an explicit prompt; message lists
    are joined by newlines) and, with ``append_eos``, the EOS token is appended so that the reward is read
    at the same token for every sample.
    """
    if uses_chat_template(tokenizer, use_chat_template):
        messages = _as_messages(prompt)
        if isinstance(completion, list):
            messages += [dict(m) for m in completion]
        else:
            messages.append({"role": "assistant", "content": message_text(completion)})
        text = tokenizer.apply_chat_template(messages, tokenize=False)
        return text, True
    if isinstance(prompt, list) or isinstance(completion, list):
        text = "\n".join(
            part for part in (message_text(prompt, every=True), message_text(completion, every=True)) if part
        )
    else:
        text = message_text(prompt) + message_text(completion)
    eos = getattr(tokenizer, "eos_token", None)
    if append_eos and eos and not text.endswith(eos):
        text += eos
    return text, False


def encode(tokenizer: Any, text: str, templated: bool) -> list[int]:
    # Chat templates write their own BOS; plain text gets the tokenizer's special tokens.
    return list(tokenizer(text, add_special_tokens=not templated)["input_ids"])


def tokenize_rows(
    rows: Sequence[dict[str, Any]],
    tokenizer: Any,
    *,
    kind: str | None = None,
    max_length: int | None = None,
    use_chat_template: bool | None = None,
    append_eos: bool = True,
) -> tuple[list[dict[str, Any]], int]:
    """Tokenised examples and the number dropped for exceeding ``max_length`` (TRL drops them too).

    Pairwise examples: ``{"chosen_ids", "rejected_ids", "margin"?, "subset"?}``; pointwise:
    ``{"input_ids", "label", "subset"?}``.
    """
    kind = kind or detect_kind(rows)
    out: list[dict[str, Any]] = []
    dropped = 0
    for row in rows:
        prompt = row.get("prompt")
        if kind == "pairwise":
            ex: dict[str, Any] = {}
            for key in PAIRWISE_KEYS:
                text, templated = build_text(
                    tokenizer, prompt, row[key], use_chat_template=use_chat_template, append_eos=append_eos
                )
                ex[f"{key}_ids"] = encode(tokenizer, text, templated)
            if row.get("margin") is not None:
                ex["margin"] = float(row["margin"])
            too_long = max_length and max(len(ex["chosen_ids"]), len(ex["rejected_ids"])) > max_length
        else:
            text, templated = build_text(
                tokenizer,
                prompt,
                row["completion"],
                use_chat_template=use_chat_template,
                append_eos=append_eos,
            )
            ex = {"input_ids": encode(tokenizer, text, templated), "label": float(row["label"])}
            too_long = max_length and len(ex["input_ids"]) > max_length
        if row.get("subset") is not None:
            ex["subset"] = str(row["subset"])
        if too_long:
            dropped += 1
            continue
        out.append(ex)
    return out, dropped


def pad_batch(sequences: Sequence[Sequence[int]], pad_id: int, side: str = "right"):
    """``(input_ids, attention_mask)`` long tensors, padded to the longest sequence."""
    import torch

    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, seq in enumerate(sequences):
        if not len(seq):
            continue
        if side == "left":
            ids[i, width - len(seq) :] = torch.as_tensor(seq)
            mask[i, width - len(seq) :] = 1
        else:
            ids[i, : len(seq)] = torch.as_tensor(seq)
            mask[i, : len(seq)] = 1
    return ids, mask


def collate_pairwise(examples: Sequence[dict[str, Any]], pad_id: int) -> dict[str, Any]:
    """Chosen then rejected sequences in one batch (one forward pass, as TRL does)."""
    import torch

    seqs = [e["chosen_ids"] for e in examples] + [e["rejected_ids"] for e in examples]
    ids, mask = pad_batch(seqs, pad_id)
    batch: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
    if any("margin" in e for e in examples):
        batch["margin"] = torch.tensor([e.get("margin", 0.0) for e in examples], dtype=torch.float32)
    return batch


def collate_pointwise(examples: Sequence[dict[str, Any]], pad_id: int) -> dict[str, Any]:
    import torch

    ids, mask = pad_batch([e["input_ids"] for e in examples], pad_id)
    labels = torch.tensor([e["label"] for e in examples], dtype=torch.float32)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
