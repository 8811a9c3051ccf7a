"""Generative reward models: an LLM judge (pointwise score, yes/no, pairwise A/B) with verdict parsing,
majority voting and soft scores (a local model, or any OpenAI-compatible server: ``backend="openai"``, with
cost and budget), a rule-verifier fallback that calls the judge only when rules cannot decide, and the judge as
reward sources: ``rubric`` (rubrics as rewards, RaR) and ``judge`` (a generative verifier).

>>> from rewardlab.rewardmodels.judge import LLMJudge                         # doctest: +SKIP
>>> judge = LLMJudge("Qwen/Qwen2.5-7B-Instruct", mode="score", k=5, temperature=0.7)  # doctest: +SKIP
>>> judge.score_batch(records)                                                # doctest: +SKIP
"""

from __future__ import annotations

from rewardlab.rewardmodels.judge.fallback import FallbackVerifier
from rewardlab.rewardmodels.judge.judge import (
    JudgeConfig,
    Judgment,
    LLMJudge,
    span_probability,
    verdict_probability,
)
from rewardlab.rewardmodels.judge.parse import KINDS, Verdict, VerdictError, parse_verdict, try_parse_verdict
from rewardlab.rewardmodels.judge.rubric import Criterion, explicit_reward, implicit_reward, parse_rubric
from rewardlab.rewardmodels.judge.sources import JudgeSource, RubricSource
from rewardlab.rewardmodels.judge.templates import TEMPLATES, get_template, render

__all__ = [
    "KINDS",
    "TEMPLATES",
    "Criterion",
    "FallbackVerifier",
    "JudgeConfig",
    "JudgeSource",
    "Judgment",
    "LLMJudge",
    "RubricSource",
    "Verdict",
    "VerdictError",
    "explicit_reward",
    "get_template",
    "implicit_reward",
    "parse_rubric",
    "parse_verdict",
    "render",
    "span_probability",
    "try_parse_verdict",
    "verdict_probability",
]
