"""A reward model folder as a reward source: an outcome RM (:class:`RewardModelSource`) or a process RM
(:class:`ProcessRewardModel`), told apart by the PRM's own config file. ``rewardlab score --reward-model``,
``rm score`` and ``eval`` build their sources here.

Importing this module registers this floor's kinds of reward-source name
(:func:`rewardlab.verifiers.sources.register_source_kind`): ``rm:PATH`` (an RL run's outcome reward model),
``judge`` (an LLM judge as a generative verifier) and ``rubric`` (rubrics as rewards, judged by an LLM), the
last two anywhere a source is named (``rewardlab score --verifier rubric``, ``serve``, an RL run). It imports
no torch: the model loads when a source is built, and the judges' builders are lazy strings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rewardlab.config import ConfigError
from rewardlab.errors import UserError
from rewardlab.extras import require
from rewardlab.hub import check_model
from rewardlab.verifiers.sources import SourceKind, register_source_kind

PRM_CONFIG_FILE = "rewardlab_prm.json"
"""Written by ``ProcessRewardModel.save_pretrained``: a folder with it holds a PRM."""


IMPLICIT_PRM_CONFIG_FILE = "rewardlab_implicit_prm.json"
"""Written by ``ImplicitPRM.save_pretrained``: a folder with it holds PRIME's implicit PRM."""


def model_kind(path: str, kind: str = "auto") -> str:
    """``orm`` or ``prm``: ``kind`` itself unless ``auto``, else what the folder at ``path`` holds.

    Raises:
        UserError: the folder holds an implicit PRM, whose rewards are an RL run's (``reward.process``)."""
    if (Path(path) / IMPLICIT_PRM_CONFIG_FILE).is_file():
        raise UserError(
            f"{path} is an implicit PRM (PRIME): its token rewards are used in RL with "
            f"reward.process: implicit_prm:{path}, not as an outcome or step reward model"
        )
    if kind != "auto":
        return kind
    return "prm" if (Path(path) / PRM_CONFIG_FILE).is_file() else "orm"


def reward_model_source(path: str, *, kind: str = "auto", **kwargs: Any) -> Any:
    """The reward source of a model folder: :class:`RewardModelSource` for an ORM, the PRM's
    ``ProcessRewardModel`` for a PRM (its folder has ``rewardlab_prm.json``). ``kwargs`` go to the ORM.

    Raises:
        ModelNotFoundError: ``path`` is neither a model folder nor a hub model (one line).
        MissingExtraError: torch or transformers is not installed (the ``rm`` extra; one line)."""
    require("torch", "transformers", extra="rm", what="a reward model")
    check_model(path, what="reward model")
    if model_kind(path, kind) == "prm":
        # lazy: pulls in torch and transformers
        from rewardlab.rewardmodels.prm import ProcessRewardModel

        return ProcessRewardModel.from_pretrained(path, device=kwargs.get("device"))
    # lazy: pulls in torch and transformers
    from rewardlab.rewardmodels.orm.scoring import RewardModelSource

    return RewardModelSource(path, **kwargs)


def _check_reward_model(name: str, config: dict[str, Any], where: str) -> None:
    if not name[3:]:
        raise ConfigError(f"{where}.name: rm: needs a reward model path (rm:PATH)")


REWARD_MODEL = register_source_kind(
    SourceKind(
        spelling="rm:PATH",
        prefixes=("rm:",),
        # a lazy path (this floor's): the source class pulls in torch and transformers
        build="rewardlab.rewardmodels.orm:RewardModelSource",
        argument="rest",
        check=_check_reward_model,
        run_only=True,
        scored_by_engine=True,
    )
)
"""``rm:PATH`` in an RL run's ``reward.sources``: the outcome reward model at ``PATH``, scored in process."""


JUDGE = register_source_kind(
    SourceKind(
        spelling="judge",
        names=("judge",),
        # lazy paths (this floor's): building one pulls in the judge's backends, not importing this module
        build="rewardlab.rewardmodels.judge.sources:JudgeSource",
        argument="none",
        check="rewardlab.rewardmodels.judge.sources:check_judge_source",
        group="LLM judges",
    )
)
"""``judge``: :class:`~rewardlab.rewardmodels.judge.sources.JudgeSource`, an LLM judge's yes/no verdict (GenRM's
verification against the row's reference when it has one), scored in process."""

RUBRIC = register_source_kind(
    SourceKind(
        spelling="rubric",
        names=("rubric",),
        build="rewardlab.rewardmodels.judge.sources:RubricSource",
        argument="none",
        check="rewardlab.rewardmodels.judge.sources:check_rubric_source",
        group="LLM judges",
    )
)
"""``rubric``: :class:`~rewardlab.rewardmodels.judge.sources.RubricSource`, the row's rubric judged criterion by
criterion (RaR-Explicit) or as a whole (RaR-Implicit), scored in process."""
