"""Multi-turn environments: episodes where the model calls tools and sees their output before it answers.

>>> from rewardlab.envs import ToolEnv, run_episodes, EnvConfig          # doctest: +SKIP
>>> env = ToolEnv(["calculator"], formats=["tag"])                       # doctest: +SKIP
>>> groups = run_episodes(backend, env, records, prompts, params, tokenizer, EnvConfig(max_turns=3))  # doctest: +SKIP

* ``base.py``: the :class:`Environment` interface (``reset`` / batched ``step`` / ``answer``);
* ``tool_env.py``: :class:`ToolEnv`, call tools until answering; ``tools.py``: ``python`` (the code
  sandbox), ``sql`` (read-only engines), ``calculator``, a user's function; ``parsing.py``: call formats;
* ``rollout.py``: the batched episode loop shared by RL and ``rewardlab eval`` (loss mask, budgets,
  metrics); ``config.py``: the ``env`` config section.

RL: ``env.name: tools`` in the config (docs/envs.md).
"""

from __future__ import annotations

from typing import Any

from rewardlab.envs.base import Environment, EpisodeState, StepResult, Turn
from rewardlab.envs.config import EnvConfig
from rewardlab.envs.parsing import ToolCall, parse_tool_calls
from rewardlab.envs.rollout import Episode, episode_metrics, run_episodes
from rewardlab.envs.tool_env import ToolEnv
from rewardlab.envs.tools import TOOLS, CalculatorTool, FunctionTool, PythonTool, SQLTool, Tool, ToolResult
from rewardlab.registry import Registry, lazy

ENVS: Registry[type[Environment]] = Registry("environment")
ENVS.register("tools", "rewardlab.envs.tool_env:ToolEnv")


def build_env(cfg: EnvConfig) -> Environment | None:
    """The environment an ``env`` config section names (``None``: single-turn)."""
    if not cfg.enabled:
        return None
    cfg.check()
    if cfg.name == "tools":
        options = {k: dict(v) for k, v in cfg.tool_options.items()}
        if cfg.python_state:
            options.setdefault("python", {})["state"] = True
        return ToolEnv(
            cfg.tools,
            formats=cfg.formats,
            tool_timeout=cfg.tool_timeout,
            max_calls_per_turn=cfg.max_calls_per_turn,
            tool_options=options,
            **cfg.kwargs,
        )
    cls: Any = lazy(cfg.name) if ":" in cfg.name else ENVS.get(cfg.name)
    return cls(**cfg.kwargs)


__all__ = [
    "ENVS",
    "TOOLS",
    "CalculatorTool",
    "EnvConfig",
    "Environment",
    "Episode",
    "EpisodeState",
    "FunctionTool",
    "PythonTool",
    "SQLTool",
    "StepResult",
    "Tool",
    "ToolCall",
    "ToolEnv",
    "ToolResult",
    "Turn",
    "build_env",
    "episode_metrics",
    "parse_tool_calls",
    "run_episodes",
]
