"""Scoring with an outcome reward model: length-sorted dynamic batches, and the RM as a reward source.

Dynamic batching sorts the sequences by length and fills each batch up to a token budget (padded tokens,
``batch size x longest sequence``), so short texts travel in large batches and long ones in small ones,
and little compute goes to padding. Results come back in input order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewardlab.extras import require
from rewardlab.progress import progress_bar
from rewardlab.types import Record, Result

from .data import build_text, encode, pad_batch
from .model import load_reward_model


def length_sorted_batches(
    lengths: Sequence[int], max_tokens: int, max_batch_size: int | None = None
) -> list[list[int]]:
    """Indices grouped into batches of similar length whose padded size stays within ``max_tokens``.

    Longest first (an out-of-memory shows at once, not at the end). A sequence longer than
    ``max_tokens`` gets a batch of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        n = max(int(lengths[i]), 1)
        width = max(longest, n)
        full = max_batch_size is not None and len(current) >= max_batch_size
        if current and (width * (len(current) + 1) > max_tokens or full):
            batches.append(current)
            current, width = [], n
        current.append(i)
        longest = width
    if current:
        batches.append(current)
    return batches


def fixed_batches(n: int, batch_size: int) -> list[list[int]]:
    """Input-order batches of ``batch_size`` (the baseline dynamic batching is measured against)."""
    return [list(range(i, min(i + batch_size, n))) for i in range(0, n, batch_size)]


class RewardModel:
    """A loaded outcome reward model that scores texts and (prompt, completion) pairs.

    Args:
        model: A model path or hub name, or a loaded ``AutoModelForSequenceClassification``.
        tokenizer: The tokenizer (loaded from ``model``'s path when omitted).
        max_tokens: Token budget of one dynamic batch (padded ``batch x length``).
        max_batch_size: Upper bound on sequences per batch.
        max_length: Longer inputs are cut from the left, keeping the end where the reward is read.
        use_chat_template: ``None``: as recorded in the model folder's ``rm_config.json`` (written by
            training), else when the tokenizer has one. Must match how the RM was trained.
        append_eos: Append EOS to plain texts (as training does); ``None``: as recorded, else True.
        device, dtype: Where and in what precision to run a model loaded from a path (device ``None``:
            CUDA when available, else CPU).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any | None = None,
        *,
        max_tokens: int = 16384,
        max_batch_size: int | None = 256,
        max_length: int | None = 2048,
        use_chat_template: bool | None = None,
        append_eos: bool | None = None,
        device: str | None = None,
        dtype: str | None = "float32",
    ) -> None:
        if isinstance(model, (str, Path)):
            require("torch", "transformers", extra="rm", what="a reward model")
            # how the model was trained (written by train_orm): the same formatting must be used here
            saved = Path(model) / "rm_config.json"
            if saved.is_file():
                import json

                trained = json.loads(saved.read_text())
                if use_chat_template is None:
                    use_chat_template = trained.get("use_chat_template")
                if append_eos is None:
                    append_eos = trained.get("append_eos", True)
            self.path = str(model)
            if device is None:
                import torch

                device = "cuda" if torch.cuda.is_available() else None
            model, tokenizer = load_reward_model(str(model), tokenizer=tokenizer, dtype=dtype, device=device)
        else:
            self.path = getattr(getattr(model, "config", None), "_name_or_path", "") or "reward-model"
            if tokenizer is None:
                raise ValueError("pass the tokenizer with a loaded model")
            if model.config.pad_token_id is None:
                model.config.pad_token_id = tokenizer.pad_token_id
        self.model = model
        self.tokenizer = tokenizer
        self.max_tokens = max_tokens
        self.max_batch_size = max_batch_size
        self.max_length = max_length
        self.use_chat_template = use_chat_template
        self.append_eos = True if append_eos is None else append_eos

    @property
    def device(self):
        return next(self.model.parameters()).device

    def encode_pair(self, prompt: Any, completion: Any) -> list[int]:
        text, templated = build_text(
            self.tokenizer,
            prompt,
            completion,
            use_chat_template=self.use_chat_template,
            append_eos=self.append_eos,
        )
        ids = encode(self.tokenizer, text, templated)
        if self.max_length and len(ids) > self.max_length:
            ids = ids[-self.max_length :]
        return ids

    def score_ids(
        self,
        sequences: Sequence[Sequence[int]],
        *,
        batches: list[list[int]] | None = None,
        progress: bool | None = False,
    ) -> list[float]:
        """Scores of token sequences, in input order; ``batches`` overrides the dynamic batching;
        ``progress``: a bar of sequences scored (``None``: only on a terminal)."""
        import torch

        if batches is None:
            batches = length_sorted_batches([len(s) for s in sequences], self.max_tokens, self.max_batch_size)
        scores = [math.nan] * len(sequences)
        pad_id = self.tokenizer.pad_token_id
        device = self.device
        self.model.eval()
        bar = progress_bar(len(sequences), "score", unit="seq", enabled=progress)
        with torch.inference_mode(), bar:
            for batch in batches:
                ids, mask = pad_batch([sequences[i] for i in batch], pad_id)
                logits = self.model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
                for i, value in zip(batch, logits[:, 0].float().tolist(), strict=True):
                    scores[i] = value
                bar.update(len(batch))
        return scores

    def score(self, prompts: Sequence[Any], completions: Sequence[Any]) -> list[float]:
        """Rewards of ``(prompt, completion)`` pairs."""
        return self.score_ids([self.encode_pair(p, c) for p, c in zip(prompts, completions, strict=True)])

    def score_texts(self, texts: Sequence[str]) -> list[float]:
        """Rewards of whole texts (no prompt)."""
        return self.score([""] * len(texts), texts)


class RewardModelSource:
    """An outcome reward model as a reward source (the verifier interface): ``score_batch(records)``.

    The reward is the model's raw score (a logit), or ``sigmoid(score)`` with ``normalize="sigmoid"``;
    ``details`` holds ``score`` and ``prob``. A row that cannot be encoded gets an error result; a model
    failure on a batch is reported on every row of the call (scoring never raises).
    """

    runs_in_process = True  # the scoring engine calls score_batch here (no pickling of the model)

    def __init__(
        self, model: Any, tokenizer: Any | None = None, *, normalize: str = "none", **kwargs: Any
    ) -> None:
        if normalize not in ("none", "sigmoid"):
            raise ValueError(f"normalize must be 'none' or 'sigmoid', got {normalize!r}")
        self.rm = model if isinstance(model, RewardModel) else RewardModel(model, tokenizer, **kwargs)
        self.normalize = normalize
        self.name = f"rm:{Path(self.rm.path).name or self.rm.path}"

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        import traceback

        encoded: list[list[int] | None] = []
        errors: list[str | None] = []
        for rec in records:
            try:
                encoded.append(self.rm.encode_pair(rec.prompt, rec.completion))
                errors.append(None)
            except Exception as exc:
                encoded.append(None)
                errors.append(f"encode error: {traceback.format_exception_only(type(exc), exc)[-1].strip()}")
        ok = [i for i, e in enumerate(encoded) if e is not None]
        try:
            values = self.rm.score_ids([encoded[i] for i in ok]) if ok else []
        except Exception as exc:
            last = traceback.format_exception_only(type(exc), exc)[-1].strip()
            return [Result.failure(f"reward model error: {last}") for _ in records]
        scores: dict[int, float] = dict(zip(ok, values, strict=True))
        out = []
        for i in range(len(records)):
            if errors[i] is not None:
                out.append(Result.failure(errors[i]))
                continue
            s = scores[i]
            prob = 1.0 / (1.0 + math.exp(-s)) if s > -700 else 0.0
            reward = prob if self.normalize == "sigmoid" else s
            out.append(Result(reward=reward, details={"score": s, "prob": prob, "model": self.rm.path}))
        return out

    def score(self, record: Record) -> Result:
        return self.score_batch([record])[0]
