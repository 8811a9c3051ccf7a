"""Settings of an evaluation: scoring and metrics (:class:`EvalConfig`), sampling (:class:`GenerationConfig`).

Plain dataclasses, so that reading them costs no generation or model import.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EvalConfig:
    """Settings of an evaluation.

    Attributes:
        ks: The k of pass@k / maj@k / best-of-k; ``None`` means 1, 2, 4, ... up to n, and n.
        workers: Scoring worker processes.
        timeout: Per-completion scoring timeout in seconds.
        correct_threshold: A sample counts as correct when its reward is at least this (1.0: all tests pass,
            all instructions followed). A graded reward (a rubric's score, a judge's scaled score) is a
            solve only at this threshold: with 1.0, a rubric sample counts only at a full score; partial
            credit shows in ``mean_reward`` and the rubric tally, never in pass@k.
        bootstrap: Bootstrap resamples for the 95% intervals (0 disables them).
        seed: Seed of the bootstrap (maj@k is exact: no sampling).
        shape: Reward-shaping steps (``rewardlab.rewardmodels.shaping`` specs such as ``"clip:0,1"`` or
            ``"length_penalty:weight=0.1"``) applied to the rewards before ``mean_reward``; correctness
            (pass@k, maj@k, best-of-k) always uses the verifier's own reward.
        score_truncated: Score completions that hit the generation limit (``finish_reason == "length"``)
            like any other. Off by default: such a sample is wrong (reward 0, error ``truncated``, no vote
            in maj@k), because text cut off after a box still parses and would be counted as a solve.
        progress: Progress bars of generation and scoring (``None``: only when stderr is a terminal).
    """

    ks: list[int] | None = None
    workers: int = 2
    timeout: float = 10.0
    correct_threshold: float = 1.0
    bootstrap: int = 1000
    seed: int = 0
    shape: list[str] | None = None
    score_truncated: bool = False
    progress: bool | None = None


@dataclass
class GenerationConfig:
    """Sampling for model evaluation.

    Attributes:
        n: Samples per problem.
        temperature: Sampling temperature (0 = greedy; then n should be 1).
        top_p: Nucleus sampling.
        max_new_tokens: Longest completion; longer ones are cut (finish reason "length").
        batch_size: Problems sent to the backend at once.
        fewshot: Worked examples prepended to each prompt (taken from the benchmark's own rows with a
            worked answer, never the problem itself).
        use_chat_template: Apply the tokenizer's chat template when it has one.
        seed: Sampling seed.
    """

    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 512
    batch_size: int = 8
    fewshot: int = 0
    use_chat_template: bool = True
    seed: int = 0
