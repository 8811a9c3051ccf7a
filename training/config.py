"""The fields every trainer shares (RL's ``train`` section, the reward models', the SFT warm start), under
transformers' ``TrainingArguments`` names, on the project's one config convention (:mod:`rewardlab.config`:
loading, overrides, renamed and refused fields, docs).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rewardlab.config import ConfigMeta, deprecations, unsupported, warn_renamed
from rewardlab.training.trackers import TRACKERS

REPORT_TO = (*TRACKERS, "none")
"""Values of ``report_to``: the experiment trackers that get the metrics besides ``metrics.jsonl`` and the
console (:mod:`.trackers`), several at once, or ``none``."""


def report_to_names(value: Any) -> list[str]:
    """``report_to`` as a list of tracker names, as transformers reads it: a single name is a one-element
    list, ``none`` (or ``[]``, ``None``) is no tracker; ``a,b`` is two. An unknown name is a ``ValueError``
    naming the known ones."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    parts = [part for item in items if item is not None for part in str(item).split(",")]
    names: list[str] = []
    for part in parts:
        name = part.strip().lower()
        if name in ("", "none"):
            continue
        if name not in TRACKERS:
            raise ValueError(f"report_to: unknown value {name!r} (known: {', '.join(REPORT_TO)})")
        if name not in names:
            names.append(name)
    return names


@dataclasses.dataclass
class BaseTrainingConfig(metaclass=ConfigMeta):
    """The optimiser, schedule, logging and checkpoint fields every trainer shares, under transformers'
    ``TrainingArguments`` names (defaults are transformers'; each trainer's config overrides its own).

    A subclass lists in ``UNSUPPORTED`` the fields its trainer cannot honour (field -> what to use instead);
    setting one to anything but its default is refused on load. ``DEPRECATED`` maps its old names to the new.
    """

    # Class attributes, not fields (unannotated): old name -> new name or Renamed; field -> why it is refused.
    DEPRECATED = {}
    UNSUPPORTED = {}

    learning_rate: float = 5e-5
    """Peak learning rate of AdamW (after the warm-up)."""
    per_device_train_batch_size: int = 8
    """Examples per forward/backward pass on each device (a micro-batch)."""
    gradient_accumulation_steps: int = 1
    """Micro-batches whose gradients are summed into one optimiser step."""
    warmup_ratio: float = 0.0
    """Fraction of the optimiser steps spent warming the learning rate up linearly (not with
    ``warmup_steps``)."""
    warmup_steps: int = 0
    """Optimiser steps of linear warm-up (not with ``warmup_ratio``)."""
    lr_scheduler_type: str = "linear"
    """Learning-rate schedule after the warm-up (``linear``, ``cosine``, ``constant``; :mod:`.optim`)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    adam_beta1: float = 0.9
    """AdamW beta1."""
    adam_beta2: float = 0.999
    """AdamW beta2."""
    adam_epsilon: float = 1e-8
    """AdamW epsilon."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm (0: no clipping)."""
    max_steps: int = -1
    """Optimiser steps to run (<= 0: as many as the epochs give)."""
    logging_steps: int = 500
    """Log every this many optimiser steps."""
    save_steps: int = 0
    """Save a checkpoint every this many optimiser steps (0: only at the end)."""
    save_total_limit: int | None = None
    """Checkpoints to keep (oldest deleted first); ``None`` or 0 keeps all."""
    eval_steps: int = 0
    """Evaluate every this many optimiser steps (0: only at the end)."""
    seed: int = 42
    """Seed of the data order, new weights' initialisation and sampling."""
    report_to: list[str] = dataclasses.field(default_factory=lambda: ["tensorboard"])
    """Experiment trackers that get the metrics besides ``metrics.jsonl`` and the console, several at once:
    ``tensorboard`` (events in ``OUTPUT/tb``; skipped when tensorboard is not installed), ``wandb``,
    ``trackio``, ``mlflow``; ``none`` or ``[]`` for none; one name alone is a one-element list
    (docs/rl.md, "Experiment trackers")."""

    def __post_init__(self) -> None:
        if self.warmup_steps > 0 and self.warmup_ratio > 0:
            raise ValueError("warmup_steps and warmup_ratio are both set: set one (the other 0)")
        for f in dataclasses.fields(self):
            why = unsupported(type(self)).get(f.name)
            if why is not None and getattr(self, f.name) != f.default:
                raise ValueError(f"{f.name}={getattr(self, f.name)!r} is not supported: {why}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "report_to":  # a name, "none", a list: always the list of tracker names (checked)
            value = report_to_names(value)
        spec = deprecations(type(self)).get(name)
        if spec is not None and "." not in name:
            warn_renamed("", name, spec.new)
            for new, new_value in spec.values(value).items():
                object.__setattr__(self, new, new_value)
            return
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        """An old name reads its new field (plain renames only), with a ``FutureWarning``."""
        spec = deprecations(type(self)).get(name) if not name.startswith("__") else None
        if spec is None or spec.convert is not None or "." in spec.new:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        warn_renamed("", name, spec.new)
        return getattr(self, spec.new)
