"""The ``env`` section of an RL config (and of ``rewardlab eval --env``): which environment, its tools and
its limits. An empty ``name`` is single-turn RL, as before environments existed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rewardlab.envs.parsing import FORMATS


@dataclass
class EnvConfig:
    """Multi-turn episodes: the environment, its tools and the limits of one episode."""

    name: str = ""
    """``""``: single-turn (one completion per sample); ``"tools"``: :class:`~rewardlab.envs.ToolEnv`; or a
    ``"module:Class"`` path to your own :class:`~rewardlab.envs.Environment`."""
    tools: list[str] = field(default_factory=lambda: ["python"])
    """Tools of the ``tools`` environment: ``python``, ``sql``, ``calculator``, or ``"module:function"``."""
    formats: list[str] = field(default_factory=lambda: ["tool_call"])
    """Tool-call formats read: ``tool_call`` (``<tool_call>{JSON}</tool_call>``, Hermes / Qwen), ``fenced``
    (````` ```python ````` blocks), ``tag`` (``<calculator>...</calculator>``)."""
    max_turns: int = 4
    """Most model turns per episode; a last turn that still calls a tool ends without an answer."""
    max_tokens: int = 1024
    """Token budget of one episode: the model's tokens and the observations' (the prompt excluded). A turn
    that reaches it, or an observation that does not fit, ends the episode as truncated."""
    tool_timeout: float = 10.0
    """Seconds one tool call may run."""
    max_calls_per_turn: int = 4
    """Tool calls run per model turn (more are answered with an error)."""
    max_observation_chars: int = 2048
    """Longest tool output shown to the model (cut with a note)."""
    observation_template: str = "\n<output>\n{output}\n</output>\n"
    """How a tool's output is shown after the model's turn (``{output}`` is replaced). With a chat
    template (``observation_format: chat``) the tokenizer's own tool message is used instead."""
    observation_format: str = "auto"
    """``text`` (``observation_template``), ``chat`` (a ``tool`` message rendered by the tokenizer's chat
    template, as Qwen / Hermes models expect) or ``auto`` (``chat`` when the prompts use the chat template)."""
    python_state: bool = False
    """The ``python`` tool keeps names and files across an episode's calls (earlier cells re-run silently)."""
    tool_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Constructor options per tool (``{sql: {db_root: data/spider}}``, ``{python: {memory_mb: 1024}}``)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Constructor options of a custom environment (``name: module:Class``)."""

    @property
    def enabled(self) -> bool:
        return bool(self.name)

    def check(self) -> None:
        """Raises ``ValueError`` on a setting no episode could run with."""
        if self.max_turns < 1:
            raise ValueError(f"env.max_turns must be at least 1, got {self.max_turns}")
        if self.max_tokens < 1:
            raise ValueError(f"env.max_tokens must be at least 1, got {self.max_tokens}")
        if self.tool_timeout <= 0:
            raise ValueError(f"env.tool_timeout must be positive, got {self.tool_timeout}")
        unknown = sorted(set(self.formats) - set(FORMATS))
        if unknown:
            raise ValueError(f"env.formats: unknown {unknown} (known: {list(FORMATS)})")
        if self.observation_format not in ("auto", "text", "chat"):
            raise ValueError(
                f"env.observation_format must be auto, text or chat, got {self.observation_format!r}"
            )
        if "{output}" not in self.observation_template:
            raise ValueError("env.observation_template must contain {output}")
