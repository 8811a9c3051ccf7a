"""A test environment for multi-turn rollouts: short model turns, replies whose length varies with the turn."""

from __future__ import annotations

from rewardlab.envs import Environment, StepResult


class Chatty(Environment):
    """Answers every turn with an observation of 1 to ``spread`` times "ab", depending on the turn's length,
    until ``turns`` turns. A turn ends at "=", "]" or a digit, so a random tiny model's turns are short."""

    name = "chatty"
    stop = tuple("=]0123456789")

    def __init__(self, turns: int = 3, spread: int = 4) -> None:
        self.turns, self.spread = turns, spread

    def step(self, episodes, turns, last):
        return [
            StepResult(done=True, end="answer")
            if last or len(ep.model_turns) >= self.turns
            else StepResult(observation="ab" * (1 + len(text) % self.spread))
            for ep, text in zip(episodes, turns, strict=True)
        ]
