"""The process reward model: a transformer read at the end of every step.

Two heads, as in the literature:

``token`` (TRL's ``PRMTrainer``)
    ``AutoModelForTokenClassification`` with two labels (0 = wrong, 1 = right; one label is read through
    a sigmoid). The step score is ``softmax(logits)[1]`` at the last token of each step's marker.
``lm`` (Math-Shepherd, Wang et al. 2024)
    A causal LM; the step score is ``softmax([logit("+"), logit("-")])[0]`` at the last token of each
    step's marker: the probability that the model writes the "good" token rather than the "bad" one there.

The model input is ``prompt + prompt_separator`` followed, for every step, by ``[step_joiner] + step +
step_marker``. The defaults (``step_marker="\\n"``, no joiner) are TRL's layout; Math-Shepherd's released
model expects ``step_marker=" ки"``, ``step_joiner="\\n"``. Steps and marker are tokenised separately and
concatenated (as TRL does), so the marker's last token is always where the score is read.

Every PRM is also a reward source (``score_batch(records) -> list[Result]``, the step scores aggregated,
``min`` by default) and a per-step scorer for RL (``score_steps`` / ``score_steps_detailed``: one score per
step plus each step's end offset in the completion text).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rewardlab.rewardmodels.prm.aggregate import aggregate
from rewardlab.rewardmodels.prm.data import first_error
from rewardlab.rewardmodels.prm.steps import MATH_SHEPHERD_TAG, record_steps
from rewardlab.types import Record, Result

CONFIG_FILE = "rewardlab_prm.json"
HEADS = ("token", "lm")


@dataclass
class PRMConfig:
    """How a PRM lays out its input and reads its output (saved next to the weights as ``rewardlab_prm.json``).

    Attributes:
        head: ``"token"`` (token-classification head) or ``"lm"`` (next-token "+"/"-" on a causal LM).
        step_marker: Text appended after every step in the model input; the score is read at its last
            token. TRL's default is ``"\\n"``; Math-Shepherd's is ``" ки"``.
        step_joiner: Text put between one step's marker and the next step (``"\\n"`` for Math-Shepherd).
        prompt_separator: Text between the prompt and the first step.
        split_separator: How raw completions are split into steps when no tag is found (``"\\n"``; blank
            steps are dropped, so ``"\\n\\n"``-separated solutions split the same way).
        split_tag: A tag that ends a step in raw completions (Math-Shepherd's ``"ки"``); ``None`` to ignore.
        good_token: ``lm`` head: the token that means "this step is right".
        bad_token: ``lm`` head: the token that means "this step is wrong".
        max_length: Longest input in tokens. Longer inputs lose prompt tokens from the left first, then
            whole trailing steps, which get a NaN score (skipped by the aggregation).
        aggregation: How step scores become a solution score: ``min`` (Lightman et al.), ``prod``, ``last``,
            ``mean``.
        threshold: A step scoring below this is predicted wrong (ProcessBench's first-error prediction).
        batch_size: Sequences per forward pass when scoring (inputs are sorted by length first).
    """

    head: str = "token"
    step_marker: str = "\n"
    step_joiner: str = ""
    prompt_separator: str = "\n"
    split_separator: str = "\n"
    split_tag: str | None = MATH_SHEPHERD_TAG
    good_token: str = "+"
    bad_token: str = "-"
    max_length: int = 2048
    aggregation: str = "min"
    threshold: float = 0.5
    batch_size: int = 16

    def __post_init__(self) -> None:
        if self.head not in HEADS:
            raise ValueError(f"unknown PRM head {self.head!r} (known: {', '.join(HEADS)})")
        if not self.step_marker:
            raise ValueError("step_marker must be non-empty: the score is read at its last token")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PRMConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class EncodedSteps:
    """A tokenised (prompt, steps) pair.

    Attributes:
        input_ids: The model input.
        positions: Index in ``input_ids`` of each kept step's read token (its marker's last token).
        n_steps: Number of steps in the solution (``len(positions)`` is smaller when steps were cut).
    """

    input_ids: list[int]
    positions: list[int]
    n_steps: int


@dataclass
class StepScores:
    """Per-step scores of one completion, with where each step ends (what RL needs to place rewards).

    Attributes:
        scores: One score in [0, 1] per step (NaN for steps cut by ``max_length``).
        steps: The step texts.
        step_ends: Character offset in ``record.completion_text`` just past each step (-1 when the step
            came from ``metadata["steps"]`` and was not found in the text). Map to token positions with
            :func:`rewardlab.rewardmodels.prm.steps.char_to_token_index`.
    """

    scores: list[float] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    step_ends: list[int] = field(default_factory=list)


def _token_ids(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []


def encode_steps(tokenizer: Any, prompt: str, steps: Sequence[str], config: PRMConfig) -> EncodedSteps:
    """Tokenises ``prompt`` and ``steps`` in the PRM's layout, returning the read position of each step."""
    head_ids = list(tokenizer(prompt + config.prompt_separator, add_special_tokens=True)["input_ids"])
    marker_ids = _token_ids(tokenizer, config.step_marker)
    step_chunks: list[list[int]] = []
    for i, step in enumerate(steps):
        text = (config.step_joiner if i else "") + step
        step_chunks.append(_token_ids(tokenizer, text) + marker_ids)
    total = len(head_ids) + sum(len(c) for c in step_chunks)
    if total > config.max_length:
        # Keep the solution: drop prompt tokens from the left (a BOS stays first), then trailing steps.
        excess = total - config.max_length
        keep_first = 1 if head_ids and head_ids[0] == getattr(tokenizer, "bos_token_id", None) else 0
        removable = max(0, len(head_ids) - keep_first - 1)
        cut = min(excess, removable)
        head_ids = head_ids[:keep_first] + head_ids[keep_first + cut :]
    input_ids = list(head_ids)
    positions: list[int] = []
    for chunk in step_chunks:
        if len(input_ids) + len(chunk) > config.max_length:
            break
        input_ids.extend(chunk)
        positions.append(len(input_ids) - 1)
    return EncodedSteps(input_ids=input_ids, positions=positions, n_steps=len(steps))


class ProcessRewardModel:
    """A PRM: scores each step of a solution; a reward source and a per-step scorer.

    >>> prm = ProcessRewardModel.from_pretrained("path/to/prm")            # doctest: +SKIP
    >>> prm.score_steps([Record(prompt="2+3-1?", completion="2+3=5\\n5-1=4")])  # doctest: +SKIP
    [[0.97, 0.95]]
    """

    name = "prm"

    def __init__(
        self, model: Any, tokenizer: Any, config: PRMConfig | None = None, device: str | None = None
    ):
        import torch

        self.model = model
        self.tokenizer = tokenizer
        self.config = config or PRMConfig()
        if device is None:
            device = str(next(model.parameters()).device)
            if device == "cpu" and torch.cuda.is_available():
                device = "cuda"
        self.device = device
        self.model.to(device)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._good_bad = None
        if self.config.head == "lm":
            self._good_bad = (self._single_id(self.config.good_token), self._single_id(self.config.bad_token))

    def _single_id(self, token: str) -> int:
        ids = _token_ids(self.tokenizer, token)
        if not ids:
            raise ValueError(f"token {token!r} encodes to nothing")
        return ids[-1]  # "+" may come out as ["▁", "+"] in SentencePiece vocabularies; the last id is "+"

    # ---- construction -------------------------------------------------------------------------------

    @classmethod
    def from_pretrained(
        cls,
        path: str,
        *,
        head: str | None = None,
        tokenizer: Any = None,
        device: str | None = None,
        dtype: Any = None,
        **overrides: Any,
    ) -> ProcessRewardModel:
        """Loads a PRM from a local folder or hub name.

        A folder written by :meth:`save_pretrained` carries its :class:`PRMConfig`. Otherwise the head is
        ``head`` when given, else ``token`` for a token-classification checkpoint and ``lm`` for anything
        else; a causal LM path loaded with ``head="token"`` gets a new, untrained two-label head (the
        start of training). ``overrides`` set :class:`PRMConfig` fields.
        """
        from transformers import AutoConfig, AutoTokenizer

        saved: dict[str, Any] = {}
        config_path = Path(path) / CONFIG_FILE
        if config_path.exists():
            saved = json.loads(config_path.read_text())
        hf_config = AutoConfig.from_pretrained(path)
        archs = getattr(hf_config, "architectures", None) or []
        is_token_ckpt = any(a.endswith("ForTokenClassification") for a in archs)
        head = head or saved.get("head") or ("token" if is_token_ckpt else "lm")
        config = PRMConfig.from_dict({**saved, **overrides, "head": head})
        tokenizer = tokenizer or AutoTokenizer.from_pretrained(path)
        model = load_backbone(path, head, dtype=dtype)
        return cls(model, tokenizer, config, device=device)

    def save_pretrained(self, path: str | Path) -> str:
        """Saves weights, tokenizer and the PRM config; :meth:`from_pretrained` reads the folder back."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        (path / CONFIG_FILE).write_text(json.dumps(asdict(self.config), indent=2, ensure_ascii=False) + "\n")
        return str(path)

    # ---- forward --------------------------------------------------------------------------------------

    def encode(self, prompt: str, steps: Sequence[str]) -> EncodedSteps:
        return encode_steps(self.tokenizer, prompt, steps, self.config)

    def collate(self, encoded: Sequence[EncodedSteps]) -> tuple[Any, Any]:
        """Right-padded ``input_ids`` and ``attention_mask`` tensors on the model's device."""
        import torch

        width = max(len(e.input_ids) for e in encoded)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(encoded), width), pad, dtype=torch.long)
        mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for i, e in enumerate(encoded):
            ids[i, : len(e.input_ids)] = torch.tensor(e.input_ids, dtype=torch.long)
            mask[i, : len(e.input_ids)] = 1
        return ids.to(self.device), mask.to(self.device)

    def step_logits(self, input_ids: Any, attention_mask: Any) -> Any:
        """Per-token two-way logits ``[batch, seq, 2]``: index 1 = right, 0 = wrong (both heads).

        For a one-label token head the tensor is ``[0, logit]``, so ``softmax`` still gives ``sigmoid``.
        """
        import torch

        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        logits = out.logits
        if self.config.head == "lm":
            good, bad = self._good_bad
            return torch.stack([logits[..., bad], logits[..., good]], dim=-1)
        if logits.shape[-1] == 1:
            return torch.cat([torch.zeros_like(logits), logits], dim=-1)
        return logits[..., :2]

    def step_log_probs(self, input_ids: Any, attention_mask: Any) -> tuple[Any, Any]:
        """Training view: ``(log p(wrong), log p(right))`` per token, each ``[batch, seq]``.

        For the ``lm`` head these are the full-vocabulary log-probabilities of the bad and good tokens
        (Math-Shepherd's language-modelling loss); for the token head, the two-label log-softmax.
        """
        import torch

        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        logits = out.logits.float()
        if self.config.head == "lm":
            logp = torch.log_softmax(logits, dim=-1)
            good, bad = self._good_bad
            return logp[..., bad], logp[..., good]
        if logits.shape[-1] == 1:
            x = logits[..., 0]
            return torch.nn.functional.logsigmoid(-x), torch.nn.functional.logsigmoid(x)
        logp = torch.log_softmax(logits[..., :2], dim=-1)
        return logp[..., 0], logp[..., 1]

    # ---- scoring --------------------------------------------------------------------------------------

    def score_encoded(self, encoded: Sequence[EncodedSteps]) -> list[list[float]]:
        """Step scores of pre-encoded inputs (NaN for steps beyond ``max_length``)."""
        import torch

        results: list[list[float]] = [[] for _ in encoded]
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].input_ids))
        bs = max(1, self.config.batch_size)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                for start in range(0, len(order), bs):
                    idx = [i for i in order[start : start + bs] if encoded[i].positions]
                    for i in order[start : start + bs]:
                        if not encoded[i].positions:
                            results[i] = [math.nan] * encoded[i].n_steps
                    if not idx:
                        continue
                    ids, mask = self.collate([encoded[i] for i in idx])
                    probs = torch.softmax(self.step_logits(ids, mask).float(), dim=-1)[..., 1].cpu()
                    for row, i in enumerate(idx):
                        e = encoded[i]
                        scores = probs[row, e.positions].tolist()
                        results[i] = scores + [math.nan] * (e.n_steps - len(scores))
        finally:
            self.model.train(was_training)
        return results

    def score_examples(self, examples: Sequence[Any]) -> list[list[float]]:
        """Step scores of :class:`~rewardlab.rewardmodels.prm.data.StepExample` objects."""
        return self.score_encoded([self.encode(ex.prompt, ex.steps) for ex in examples])

    def split(self, record: Record):
        """The steps of a record under this PRM's splitting rules (``metadata["steps"]`` wins)."""
        return record_steps(record, separator=self.config.split_separator, step_tag=self.config.split_tag)

    def score_steps_detailed(self, records: Sequence[Record]) -> list[StepScores]:
        """Per-step scores of each record, with the steps and their end offsets in the completion text."""
        splits = [self.split(r) for r in records]
        encoded = [self.encode(r.prompt_text, s.steps) for r, s in zip(records, splits, strict=False)]
        scores = self.score_encoded(encoded)
        return [
            StepScores(scores=sc, steps=s.steps, step_ends=s.ends)
            for sc, s in zip(scores, splits, strict=False)
        ]

    def score_steps(self, records: Sequence[Record]) -> list[list[float]]:
        """One score in [0, 1] per step of each record (the per-step scorer interface of RL)."""
        return [s.scores for s in self.score_steps_detailed(records)]

    def result_from_scores(self, scores: StepScores) -> Result:
        """The reward-source view of one record's step scores."""
        if not scores.steps:
            return Result.failure("no steps: the completion is empty")
        details: dict[str, Any] = {
            "step_scores": [None if math.isnan(s) else round(s, 6) for s in scores.scores],
            "step_ends": scores.step_ends,
            "aggregation": self.config.aggregation,
            "first_error": first_error(
                [None if math.isnan(s) else s for s in scores.scores], self.config.threshold
            ),
        }
        cut = sum(1 for s in scores.scores if math.isnan(s))
        if cut:
            details["truncated_steps"] = cut
        try:
            reward = aggregate(scores.scores, self.config.aggregation)
        except ValueError as exc:
            return Result.failure(f"no step scores: {exc}", **details)
        return Result(reward=reward, details=details)

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        """Reward-source interface: the aggregated step score as reward, step scores in ``details``."""
        return [self.result_from_scores(s) for s in self.score_steps_detailed(records)]

    def score(self, record: Record) -> Result:
        return self.score_batch([record])[0]


def load_backbone(path: str, head: str, *, dtype: Any = None, num_labels: int = 2) -> Any:
    """The transformers model for ``head``: a token-classification model (a new two-label head on a causal
    LM checkpoint) or a causal LM."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForTokenClassification

    kwargs: dict[str, Any] = {}
    if dtype is not None:
        kwargs["dtype"] = dtype
    if head == "token":
        hf_config = AutoConfig.from_pretrained(path)
        archs = getattr(hf_config, "architectures", None) or []
        if not any(a.endswith("ForTokenClassification") for a in archs):
            kwargs["num_labels"] = num_labels
        return AutoModelForTokenClassification.from_pretrained(path, **kwargs)
    if head == "lm":
        return AutoModelForCausalLM.from_pretrained(path, **kwargs)
    raise ValueError(f"unknown PRM head {head!r} (known: {', '.join(HEADS)})")


__all__ = ["CONFIG_FILE", "EncodedSteps", "PRMConfig", "ProcessRewardModel", "StepScores", "encode_steps"]
