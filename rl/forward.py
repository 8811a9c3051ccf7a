"""The RL trainer's forward passes over a :func:`rewardlab.rl.batch.build_tensors` batch: per-token
log-probs and entropies, the critic's values, self-certainty, and the split of a batch into micro-batches.

Every pass reads the padded rows, or with ``train.padding_free`` one packed row per micro-batch
(:mod:`rewardlab.rl.packing`), and returns ``(B, T)`` results either way.
"""

from __future__ import annotations

from typing import Any

import torch

from rewardlab import core_algos as ca
from rewardlab.rl import packing
from rewardlab.rl.config import RLConfig
from rewardlab.training import device as dev
from rewardlab.training import parallel

__all__ = ["CHUNK_MIN_VOCAB_RATIO", "ForwardPasses"]

CHUNK_MIN_VOCAB_RATIO = 4
"""``train.logprob_chunk_tokens`` applies to models whose vocabulary is at least this many times their hidden
size: below it a token's logits cost less than its activations, and chunking saves nothing worth a change
of float rounding (the tiny demo model: 103 tokens, hidden size 128)."""


class ForwardPasses:
    """Forward passes of any of the run's models (policy, reference, critic, a sampler's copy)."""

    def __init__(self, cfg: RLConfig, device: torch.device, use_bf16: bool) -> None:
        self.cfg = cfg
        self.device = device
        self.use_bf16 = use_bf16
        self._full_logits_models: set[int] = set()  # models whose logits are not their head's output

    @property
    def temperature(self) -> float:
        """The sampling temperature the logits are divided by (1 for greedy)."""
        return self.cfg.rollout.temperature if self.cfg.rollout.temperature > 0 else 1.0

    def autocast(self) -> Any:
        return dev.autocast(self.device, self.use_bf16)

    def logprobs(
        self, model: Any, batch: dict[str, torch.Tensor], idx: torch.Tensor, *, entropy: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per-token log-probs (and entropies) of the responses of rows ``idx`` under ``model``."""
        inputs, packed = self.forward_inputs(batch, idx)
        labels = batch["responses"][idx].to(self.device) if packed is None else packed.labels[None]
        chunked = self._from_hidden(model, inputs, labels, entropy) if self._chunks(model) else None
        if chunked is not None:
            logp, ent = chunked
        else:
            with self.autocast():
                out = model(**inputs, use_cache=False)
            logits = (out.logits[:, :-1] if packed is None else out.logits).float()
            logp, ent = self._from_logits(logits, labels, entropy)
        if ent is not None and not self.cfg.algorithm.entropy_coef:  # logged only: out of the autograd graph
            ent = ent.detach()
        if packed is not None:  # back to (B, T)
            logp, ent = packed.unpack(logp[0]), packed.unpack(ent[0]) if ent is not None else None
        return logp, ent

    def _from_logits(
        self, logits: torch.Tensor, labels: torch.Tensor, entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        temp = self.temperature
        logp = ca.logprobs_from_logits(logits, labels, temperature=temp)
        if not entropy:
            return logp, None
        if self.cfg.algorithm.entropy_coef:
            return logp, ca.entropy_from_logits(logits, temperature=temp)
        with torch.no_grad():
            return logp, ca.entropy_from_logits(logits.detach(), temperature=temp)

    def _chunks(self, model: Any) -> bool:
        """Whether ``model``'s log-probs are read from its hidden states (``train.logprob_chunk_tokens``)."""
        if not self.cfg.train.logprob_chunk_tokens or id(model) in self._full_logits_models:
            return False
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        weight = getattr(head, "weight", None)
        # FSDP2 gathers a sharded head's weight only inside the model's own forward.
        if weight is None or type(weight).__name__ == "DTensor" or weight.dim() != 2:
            return False
        vocab, hidden = weight.shape
        return vocab >= CHUNK_MIN_VOCAB_RATIO * hidden

    def _from_hidden(
        self, model: Any, inputs: dict[str, Any], labels: torch.Tensor, entropy: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """Log-probs (and entropies) from the last hidden states through the LM head in chunks, or ``None``
        when the model's logits are not its head's output (it then keeps the full logits)."""
        with self.autocast():
            hidden = self._hidden_states(model, inputs)
            if hidden is None:
                return None
            return ca.token_logprobs_from_hidden(
                hidden,
                model.get_output_embeddings(),
                labels,
                self.temperature,
                chunk_tokens=self.cfg.train.logprob_chunk_tokens,
                entropy=entropy,
            )

    def _hidden_states(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor | None:
        """The last hidden states at the positions whose logits ``inputs`` keep (``logits_to_keep`` less the
        last), from a forward that computes the logits of one position only; ``None`` (and the model keeps
        the full logits from then on) when those logits are not the LM head's output of its hidden state."""
        keep = inputs["logits_to_keep"]
        out = model(**{**inputs, "logits_to_keep": 1}, use_cache=False, output_hidden_states=True)
        last = out.hidden_states[-1]
        with torch.no_grad():
            head_logits = model.get_output_embeddings()(last[:, -1:]).float()
            same = torch.allclose(head_logits, out.logits.float(), rtol=2e-2, atol=2e-2)
        if not same:
            self._full_logits_models.add(id(model))
            return None
        return last[:, -keep:-1] if isinstance(keep, int) else last[:, keep]

    def forward_inputs(
        self, batch: dict[str, torch.Tensor], idx: torch.Tensor
    ) -> tuple[dict[str, Any], packing.PackedBatch | None]:
        """The model's inputs for rows ``idx``: the padded rows (logits of the last ``T + 1`` positions), or
        with ``train.padding_free`` one packed row (logits of the positions that predict response tokens)."""
        if self.cfg.train.padding_free:
            rows = (batch[k][idx] for k in ("input_ids", "attention_mask", "response_mask"))
            packed = packing.pack(*rows).to(self.device)
            return packed.model_inputs(), packed
        return self.padded_inputs(batch, idx), None

    def padded_inputs(self, batch: dict[str, torch.Tensor], idx: torch.Tensor) -> dict[str, Any]:
        """Rows ``idx`` as padded model inputs, keeping the logits of the last ``T + 1`` positions."""
        inputs = {k: batch[k][idx].to(self.device) for k in ("input_ids", "attention_mask", "position_ids")}
        return {**inputs, "logits_to_keep": batch["responses"].shape[1] + 1}

    def micro_batches(self, batch: dict[str, torch.Tensor], rows: torch.Tensor) -> list[torch.Tensor]:
        """``rows`` split into forward passes: ``micro_batch_size`` samples each, or with
        ``micro_batch_tokens`` about that many real tokens each (the same count on every rank)."""
        tc = self.cfg.train
        if not len(rows):
            return []
        if not tc.micro_batch_tokens:
            return list(torch.split(rows, max(1, tc.per_device_train_batch_size)))
        lengths = batch["attention_mask"][rows].sum(-1).tolist()
        count = len(packing.token_budget_micro_batches(lengths, tc.micro_batch_tokens))
        count = -parallel.all_ranks_min(-count, self.device)  # the most any rank needs
        return [
            rows[idx] for idx in packing.token_budget_micro_batches(lengths, tc.micro_batch_tokens, count)
        ]

    def no_grad_logprobs(self, model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Per-token log-probs of every row under ``model``, without gradient, micro-batch by micro-batch."""
        return self._no_grad_per_token(model, batch, entropy=False)

    def no_grad_entropies(self, model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Per-token entropies of every row under ``model``, without gradient (a tree rollout's branch
        points)."""
        return self._no_grad_per_token(model, batch, entropy=True)

    def _no_grad_per_token(
        self, model: Any, batch: dict[str, torch.Tensor], *, entropy: bool
    ) -> torch.Tensor:
        rows = torch.arange(batch["input_ids"].shape[0])
        out = torch.zeros(batch["responses"].shape, dtype=torch.float32)
        with torch.no_grad():
            for idx in self.micro_batches(batch, rows):
                logp, ent = self.logprobs(model, batch, idx, entropy=entropy)
                out[idx] = (ent if entropy else logp).float().cpu()
        return out

    def values(self, model: Any, batch: dict[str, torch.Tensor], idx: torch.Tensor) -> torch.Tensor:
        """The critic ``model``'s values of the response tokens of rows ``idx``."""
        inputs, packed = self.forward_inputs(batch, idx)
        at = packed.logit_index if packed is not None else batch["responses"].shape[1]
        with self.autocast():
            values = model(inputs["input_ids"], inputs["attention_mask"], inputs["position_ids"], at).float()
        return values if packed is None else packed.unpack(values[0])

    def no_grad_values(self, model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The critic's values of every row, without gradient, micro-batch by micro-batch."""
        out = torch.zeros(batch["responses"].shape, dtype=torch.float32)
        with torch.no_grad():
            for idx in self.micro_batches(batch, torch.arange(batch["input_ids"].shape[0])):
                out[idx] = self.values(model, batch, idx).float().cpu()
        return out

    def self_certainty(self, model: Any, batch: dict[str, torch.Tensor]) -> list[float]:
        """Each row's self-certainty (:func:`rewardlab.core_algos.self_certainty`) over its loss tokens
        under ``model``, without gradient (from the hidden states in chunks when log-probs are)."""
        scores = []
        with torch.no_grad():
            for idx in self.micro_batches(batch, torch.arange(batch["input_ids"].shape[0])):
                mask = batch["loss_mask"][idx].to(self.device)
                scores.append(self._row_certainty(model, self.padded_inputs(batch, idx), mask).cpu())
        return torch.cat(scores).tolist() if scores else []

    def _row_certainty(self, model: Any, inputs: dict[str, Any], mask: torch.Tensor) -> torch.Tensor:
        temp, chunk = self.temperature, self.cfg.train.logprob_chunk_tokens
        with self.autocast():
            hidden = self._hidden_states(model, inputs) if self._chunks(model) else None
            if hidden is not None:
                head = model.get_output_embeddings()
                return ca.self_certainty_from_hidden(hidden, head, mask, temp, chunk_tokens=chunk)
            logits = model(**inputs, use_cache=False).logits[:, :-1]
        return ca.self_certainty(logits.float() / temp, mask)
