"""The implicit process reward model (PRIME, Cui et al., 2025; Yuan et al., 2024, "Free Process Rewards
without Process Labels"): a causal LM ``pi_phi`` trained as an outcome reward model whose reward is
parameterised as

    r_phi(y) = beta * log(pi_phi(y) / pi_ref(y)),

so that each response token gets a process reward for free:

    r_t = beta * (log pi_phi(y_t | y_<t) - log pi_ref(y_t | y_<t)).

The reference ``pi_ref`` is frozen; PRIME starts ``pi_phi`` and ``pi_ref`` from the same model (the SFT
policy), so a fresh implicit PRM gives exactly zero rewards. The math (token rewards, the outcome logit, the
loss) is :mod:`rewardlab.core_algos.prime`'s; this module holds the two models and reads their log-probs.

Input layout (the RL trainer's batch): ``input_ids`` ``(B, L)`` whose last ``T`` columns are the responses,
left-padded prompts and right-padded responses, ``attention_mask`` ``(B, L)`` and ``response_mask`` ``(B, T)``
(1 on each response token). Position ids are read from the attention mask, so padding changes nothing.

A saved implicit PRM is a causal-LM folder (``save_pretrained``) plus ``rewardlab_implicit_prm.json`` (beta and
where the reference is: a hub name, a path, or ``reference/`` inside the folder when it has no other home);
:meth:`ImplicitPRM.from_pretrained` reloads both models. Any causal LM path loads too: both models start
from it (PRIME's initialisation).
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from rewardlab.core_algos.logits import logprobs_from_logits
from rewardlab.core_algos.prime import implicit_outcome_logits, implicit_prm_loss, implicit_token_rewards
from rewardlab.rewardmodels.implicit_prm.config import DEFAULT_BETA
from rewardlab.rewardmodels.sources import IMPLICIT_PRM_CONFIG_FILE

CONFIG_FILE = IMPLICIT_PRM_CONFIG_FILE
REFERENCE_DIR = "reference"
"""The reference's folder inside a saved implicit PRM, when the reference has no path of its own."""


@dataclass
class ImplicitPRMConfig:
    """What ``rewardlab_implicit_prm.json`` holds next to the weights.

    Attributes:
        beta: The reward's scale, ``r = beta * log(pi_phi / pi_ref)`` (PRIME's ``beta_train``, 0.05).
        reference: The frozen reference: a hub name, an absolute path, or a path relative to the saved folder
            (``reference``); ``None``: the folder's own weights (a PRM saved before any training).
    """

    beta: float = DEFAULT_BETA
    reference: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ImplicitPRMConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def frozen(model: Any) -> Any:
    """``model`` in eval mode with no trainable weight (the reference)."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def load_causal_lm(path: str, dtype: Any = None) -> Any:
    """A causal LM from a folder or hub name (``dtype``: a torch dtype, or ``None`` for the saved one)."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, **({"dtype": dtype} if dtype is not None else {}))


def response_logprobs(model: Any, input_ids: Any, attention_mask: Any, response_len: int) -> Any:
    """``(B, T)`` log-probabilities of the last ``T = response_len`` tokens of each row under ``model``
    (temperature 1), position ids from the attention mask so that left padding changes nothing; only the
    last ``T + 1`` positions' logits are computed."""
    position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        logits_to_keep=response_len + 1,
        use_cache=False,
    )
    logits = out.logits[:, -(response_len + 1) : -1].float()
    return logprobs_from_logits(logits, input_ids[:, -response_len:])


class ImplicitPRM:
    """A trainable causal LM and its frozen reference, read as an implicit PRM.

    >>> prm = ImplicitPRM.from_pretrained("runs/implicit-prm")                       # doctest: +SKIP
    >>> prm.token_rewards(input_ids, attention_mask, response_mask)   # (B, T)      # doctest: +SKIP
    """

    name = "implicit_prm"

    def __init__(
        self,
        model: Any,
        reference: Any,
        *,
        beta: float = DEFAULT_BETA,
        tokenizer: Any = None,
        reference_source: str | None = None,
        device: Any = None,
    ) -> None:
        if not beta > 0:
            raise ValueError(f"beta must be > 0, got {beta}")
        self.model = model
        self.reference = frozen(reference)
        self.beta = float(beta)
        self.tokenizer = tokenizer
        self.reference_source = reference_source
        """Where the reference loads from (a hub name or path); ``None``: saved with the PRM."""
        if device is not None:
            self.to(device)

    # ---- construction -------------------------------------------------------------------------------
    @classmethod
    def from_model(cls, model: Any, *, beta: float = DEFAULT_BETA, tokenizer: Any = None) -> ImplicitPRM:
        """PRIME's start: ``model`` trains and a frozen copy of it is the reference (rewards exactly 0)."""
        return cls(model, copy.deepcopy(model), beta=beta, tokenizer=tokenizer)

    @classmethod
    def from_pretrained(
        cls,
        path: str,
        *,
        reference: str | None = None,
        beta: float | None = None,
        tokenizer: Any = None,
        device: Any = None,
        dtype: Any = None,
    ) -> ImplicitPRM:
        """Loads a saved implicit PRM (its ``rewardlab_implicit_prm.json`` names beta and the reference) or
        starts one from any causal LM (both models from ``path``, beta 0.05). ``reference`` and ``beta``
        override the saved ones; ``tokenizer``: the folder's when it has one."""
        folder = Path(path)
        saved = ImplicitPRMConfig()
        if (folder / CONFIG_FILE).is_file():
            saved = ImplicitPRMConfig.from_dict(json.loads((folder / CONFIG_FILE).read_text()))
        source = reference or _resolve_reference(folder, saved.reference) or path
        model = load_causal_lm(path, dtype)
        ref = load_causal_lm(source, dtype)
        if tokenizer is None and (folder / "tokenizer_config.json").is_file():
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(path)
        return cls(
            model,
            ref,
            beta=saved.beta if beta is None else beta,
            tokenizer=tokenizer,
            reference_source=source,
            device=device,
        )

    def save_pretrained(self, path: str | Path) -> str:
        """Writes the trainable model (and tokenizer) and ``rewardlab_implicit_prm.json``; the reference is
        named by its source, or written to ``reference/`` when it has none (a copy of a model in memory) or
        when its source is this very folder (which the new weights overwrite)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        reference = _portable(self.reference_source)
        if reference is None or _same_folder(reference, path):
            self.reference.save_pretrained(path / REFERENCE_DIR)
            reference = REFERENCE_DIR
        self.model.save_pretrained(path)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(path)
        config = ImplicitPRMConfig(beta=self.beta, reference=reference)
        (path / CONFIG_FILE).write_text(json.dumps(asdict(config), indent=2) + "\n")
        return str(path)

    # ---- models ---------------------------------------------------------------------------------------
    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def to(self, device: Any) -> ImplicitPRM:
        self.model.to(device)
        self.reference.to(device)
        return self

    def parameters(self) -> list[Any]:
        """The trainable weights (the reference has none)."""
        return [p for p in self.model.parameters() if p.requires_grad]

    # ---- rewards --------------------------------------------------------------------------------------
    def logprobs(self, input_ids: Any, attention_mask: Any, response_len: int) -> tuple[Any, Any]:
        """``(log pi_phi, log pi_ref)`` of the responses, ``(B, T)`` each; the reference's without
        gradient, the trainable model's with it when gradients are enabled."""
        import torch

        with torch.no_grad():
            ref = response_logprobs(self.reference, input_ids, attention_mask, response_len)
        return response_logprobs(self.model, input_ids, attention_mask, response_len), ref

    def token_rewards(self, input_ids: Any, attention_mask: Any, response_mask: Any) -> Any:
        """``(B, T)`` process rewards ``beta * (log pi_phi - log pi_ref)`` on the response tokens (0 elsewhere),
        with gradient through ``pi_phi`` when gradients are enabled."""
        mask = response_mask.to(input_ids.device)
        logp, ref = self.logprobs(input_ids, attention_mask, mask.shape[1])
        return implicit_token_rewards(logp, ref, mask, self.beta)

    def outcome_logits(self, input_ids: Any, attention_mask: Any, response_mask: Any) -> Any:
        """``(B,)`` the ORM view: ``r_phi(y)`` (the summed token rewards), whose sigmoid is the predicted
        probability of a correct outcome."""
        rewards = self.token_rewards(input_ids, attention_mask, response_mask)
        return implicit_outcome_logits(rewards, response_mask.to(rewards.device))

    def loss(
        self, input_ids: Any, attention_mask: Any, response_mask: Any, labels: Any, loss_type: str = "ce"
    ) -> tuple[Any, Any]:
        """``(loss, token rewards)``: PRIME's loss of the outcome labels (``ce``: cross-entropy of
        ``sigmoid(r_phi(y))`` against the 0/1 label), and the ``(B, T)`` rewards it was computed from
        (detached)."""
        rewards = self.token_rewards(input_ids, attention_mask, response_mask)
        mask = response_mask.to(rewards.device)
        loss = implicit_prm_loss(rewards, mask, labels.to(rewards.device), loss_type=loss_type)
        return loss, rewards.detach()


def _resolve_reference(folder: Path, reference: str | None) -> str | None:
    """A saved reference as a loadable name: relative paths are inside the PRM's folder."""
    if reference is None:
        return None
    inside = folder / reference
    return str(inside) if not Path(reference).is_absolute() and inside.exists() else reference


def _portable(source: str | None) -> str | None:
    """A reference source as saved: an existing local path made absolute, a hub name as it is."""
    if source is None:
        return None
    return str(Path(source).resolve()) if Path(source).exists() else source


def _same_folder(a: str, b: Path) -> bool:
    return Path(a).exists() and b.exists() and Path(a).resolve() == b.resolve()


__all__ = [
    "CONFIG_FILE",
    "DEFAULT_BETA",
    "REFERENCE_DIR",
    "ImplicitPRM",
    "ImplicitPRMConfig",
    "load_causal_lm",
    "response_logprobs",
]
