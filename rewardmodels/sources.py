"""A reward model folder as a reward source: an outcome RM (:class:`RewardModelSource`) or a process RM
(:class:`ProcessRewardModel`), told apart by the PRM's own config file. ``rewardlab score --reward-model``,
``rm score`` and ``eval`` build their sources here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rewardlab.hub import check_model

PRM_CONFIG_FILE = "rewardlab_prm.json"
"""Written by ``ProcessRewardModel.save_pretrained``: a folder with it holds a PRM."""


def model_kind(path: str, kind: str = "auto") -> str:
    """``orm`` or ``prm``: ``kind`` itself unless ``auto``, else what the folder at ``path`` holds."""
    if kind != "auto":
        return kind
    return "prm" if (Path(path) / PRM_CONFIG_FILE).is_file() else "orm"


def reward_model_source(path: str, *, kind: str = "auto", **kwargs: Any) -> Any:
    """The reward source of a model folder: :class:`RewardModelSource` for an ORM, the PRM's
    ``ProcessRewardModel`` for a PRM (its folder has ``rewardlab_prm.json``). ``kwargs`` go to the ORM.

    Raises:
        ModelNotFoundError: ``path`` is neither a model folder nor a hub model (one line)."""
    check_model(path, what="reward model")
    if model_kind(path, kind) == "prm":
        # lazy: pulls in torch and transformers
        from rewardlab.rewardmodels.prm import ProcessRewardModel

        return ProcessRewardModel.from_pretrained(path, device=kwargs.get("device"))
    # lazy: pulls in torch and transformers
    from rewardlab.rewardmodels.orm.scoring import RewardModelSource

    return RewardModelSource(path, **kwargs)
