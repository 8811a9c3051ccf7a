"""``ToolEnv``: the model calls tools until it answers without one.

Each model turn is parsed for calls (``envs/parsing.py``); calls run (all episodes' calls to one tool as one
batch), and their outputs, joined, are the observation. A turn with no call is the answer and ends the
episode. A malformed call (one over the parser's size or depth limits too), an unknown tool, or more calls
than allowed get an observation saying so.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from rewardlab.envs.base import END_ANSWER, END_MAX_TURNS, Environment, EpisodeState, StepResult
from rewardlab.envs.parsing import (
    FORMATS,
    MAX_CALL_CHARS,
    MAX_CALL_DEPTH,
    ToolCall,
    parse_tool_calls,
    stop_strings,
)
from rewardlab.envs.tools import Tool, ToolResult, build_tool


class ToolEnv(Environment):
    """An environment whose only rule is "call tools, then answer".

    Args:
        tools: Tool names (``python``, ``sql``, ``calculator``), ``"module:attr"`` paths, :class:`Tool`
            objects or functions.
        formats: Call formats read (``tool_call``, ``fenced``, ``tag``; see ``envs/parsing.py``).
        tool_timeout: Seconds one call may take.
        max_calls_per_turn: Calls run per turn; the rest are answered ``too_many_calls``.
        tool_options: Constructor options per tool name (``{"python": {"state": True}}``).
        max_call_chars: Longest call read, in characters; a longer one is answered ``too_large`` unparsed.
        max_call_depth: Deepest nesting of a call's JSON; deeper is answered ``too_large`` unparsed (see
            ``envs/parsing.py``: Python's JSON parser would run out of stack).
    """

    name = "tools"

    def __init__(
        self,
        tools: Sequence[Any] = ("python",),
        *,
        formats: Sequence[str] = ("tool_call",),
        tool_timeout: float = 10.0,
        max_calls_per_turn: int = 4,
        tool_options: dict[str, dict[str, Any]] | None = None,
        max_call_chars: int = MAX_CALL_CHARS,
        max_call_depth: int = MAX_CALL_DEPTH,
    ) -> None:
        unknown = sorted(set(formats) - set(FORMATS))
        if unknown:
            raise ValueError(f"unknown tool-call format(s) {unknown} (known: {list(FORMATS)})")
        if max_call_chars < 1 or max_call_depth < 2:  # depth 2: {"name": ..., "arguments": {...}}
            raise ValueError(
                f"max_call_chars must be >= 1 and max_call_depth >= 2, got {max_call_chars}, {max_call_depth}"
            )
        options = tool_options or {}
        self.tools: dict[str, Tool] = {}
        for spec in tools:
            tool = build_tool(spec, options.get(spec) if isinstance(spec, str) else None)
            self.tools[tool.name] = tool
        self.formats = list(formats)
        self.tool_timeout = float(tool_timeout)
        self.max_calls_per_turn = max(1, int(max_calls_per_turn))
        self.max_call_chars, self.max_call_depth = int(max_call_chars), int(max_call_depth)
        self.stop = stop_strings(self.formats, list(self.tools))
        self._primary = {name: tool.primary for name, tool in self.tools.items()}

    def calls(self, text: str) -> list[ToolCall]:
        """The tool calls in a model turn."""
        return parse_tool_calls(
            text, self.formats, self._primary, max_chars=self.max_call_chars, max_depth=self.max_call_depth
        )

    def step(self, episodes: Sequence[EpisodeState], turns: Sequence[str], last: bool) -> list[StepResult]:
        per_episode = [self.calls(text) for text in turns]
        results: list[list[ToolResult | None]] = [[None] * len(c) for c in per_episode]
        batches: dict[str, list[tuple[int, int, ToolCall]]] = defaultdict(list)
        out: list[StepResult | None] = [None] * len(episodes)
        for e, calls in enumerate(per_episode):
            if not calls:
                out[e] = StepResult(done=True, end=END_ANSWER)
            elif last:
                out[e] = StepResult(done=True, end=END_MAX_TURNS)
            else:
                for c, call in enumerate(calls):
                    early = self._refusal(call, c)
                    if early is not None:
                        results[e][c] = early
                    else:
                        batches[call.name].append((e, c, call))
        for name, batch in batches.items():
            t0 = time.perf_counter()
            outputs = self.tools[name].run(
                [(episodes[e], call.arguments) for e, _, call in batch], self.tool_timeout
            )
            share = (time.perf_counter() - t0) / len(batch)
            for (e, c, _), result in zip(batch, outputs, strict=True):
                results[e][c] = result
                episodes[e].tool_seconds += share
        for e, episode in enumerate(episodes):
            if out[e] is None:
                out[e] = StepResult(self._observation(episode, per_episode[e], results[e]))  # type: ignore[arg-type]
        return out  # type: ignore[return-value]

    def _refusal(self, call: ToolCall, index: int) -> ToolResult | None:
        """The answer to a call that is not run: malformed, unknown tool, or over the per-turn limit."""
        if call.error:
            return ToolResult(f"error: {call.error}", call.kind)
        if call.name not in self.tools:
            known = ", ".join(sorted(self.tools))
            return ToolResult(f"error: unknown tool {call.name!r} (tools: {known})", "unknown_tool")
        if index >= self.max_calls_per_turn:
            return ToolResult(f"error: at most {self.max_calls_per_turn} calls per turn", "too_many_calls")
        return None

    def _observation(self, episode: EpisodeState, calls: list[ToolCall], results: list[ToolResult]) -> str:
        episode.tool_calls += len(calls)
        for result in results:
            if result.error:
                episode.tool_errors[result.error] += 1
        if len(results) == 1:
            return results[0].output
        return "\n".join(
            f"[{call.name or 'call'} {i + 1}]\n{r.output}"
            for i, (call, r) in enumerate(zip(calls, results, strict=True))
        )

    def close(self) -> None:
        for tool in self.tools.values():
            tool.close()
