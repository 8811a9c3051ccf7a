"""The LLM judge as reward sources: ``rubric`` (rubrics as rewards, RaR; Gunjal et al., 2025) and ``judge`` (a
generative verifier, GenRM-style), both built on :class:`~rewardlab.rewardmodels.judge.judge.LLMJudge` (its
backends, sampling, verdict parsing, votes and soft scores, and its ``openai`` backend's retries, cache, cost
and budget).

:class:`RubricSource` reads each row's rubric (:attr:`RubricSourceConfig.rubric_field` of the row's
metadata, i.e. a ``rubric`` column of the input file; else the row's ``reference`` when that is a rubric: a
list, or a JSON list) and scores the response against it:

* ``aggregation="explicit"`` (RaR-Explicit): one judge prompt per criterion (template ``rubric_criterion``,
  ``rubric_pitfall`` for pitfalls: yes = the mistake was made), every criterion of every row of the batch in
  ONE ``backend.generate`` call; the request of a criterion holds only the question, the response and the
  criterion (and the sampling settings), so the same criterion of the same response is one request, and the
  ``openai`` backend's cache answers it again for free. Reward:
  :func:`~rewardlab.rewardmodels.judge.rubric.explicit_reward` of the voted verdicts, or of P(yes) with
  ``reward_from="soft"``. A criterion the judge gives no verdict for (no parseable sample, a failed request,
  a request the budget did not send) makes the row an error row naming it, never a guess.
* ``aggregation="implicit"`` (RaR-Implicit): one prompt per row with the whole rubric (``rubric_implicit``),
  a 1-10 score; reward :func:`~rewardlab.rewardmodels.judge.rubric.implicit_reward`. Gates are shown to the
  judge as required but not applied (no per-criterion verdicts).

``details`` (the viewer reads these keys): ``criteria`` (per criterion: ``criterion``, ``weight``,
``category``, ``gate``, ``met``, ``probability``, ``verdict_text``), ``aggregation`` and ``rubric_score`` (the
reward; ``None`` on an error row).

:class:`JudgeSource` asks one yes/no question per row: with a reference answer GenRM's verification prompt
(``genrm_verify``: is the answer correct, against the reference), without one the judge's pointwise
``binary`` template; the reward is the voted verdict, or P(yes) with ``reward_from="soft"``.

Both are reward-source kinds (``rubric``, ``judge``: :mod:`rewardlab.rewardmodels.sources`), built from the
settings of :class:`RubricSourceConfig` / :class:`JudgeSourceConfig`; one row's bad rubric or failed request
is that row's error, the others are scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from rewardlab.config import ConfigError
from rewardlab.remote import Failed
from rewardlab.rewardmodels.judge.cost import BUDGET_EXHAUSTED, as_price
from rewardlab.rewardmodels.judge.criteria import CriteriaTally
from rewardlab.rewardmodels.judge.judge import REMOTE_BACKENDS, Judgment, LLMJudge, request_error
from rewardlab.rewardmodels.judge.remote import ChatAPIConfig
from rewardlab.rewardmodels.judge.rubric import (
    Criterion,
    criterion_details,
    explicit_reward,
    implicit_reward,
    parse_rubric,
    rubric_text,
)
from rewardlab.rewardmodels.judge.templates import get_template, render
from rewardlab.types import Record, Result

LOCAL_BACKENDS = ("hf", "vllm")
"""Backends that load the judge model here (the ``rm`` extra)."""


@dataclass
class JudgeSettings:
    """The judge's settings that both sources share (every field is a ``--config KEY=VALUE`` of
    ``rewardlab score``, a ``kwargs`` key of an RL reward source)."""

    backend: str = "openai"
    """``openai`` (any OpenAI-compatible chat-completions server), or ``hf`` / ``vllm`` (a local model: the
    ``rm`` extra)."""
    model: str | None = None
    """``openai``: the served model's name (``None``: the first the server lists); ``hf``/``vllm``: a model
    folder or hub name (needed)."""
    base_url: str | None = None
    """``openai``: the server's API root (``http://host:8000/v1``); needed: a judge's server is never
    guessed."""
    api_key_env: str | None = "OPENAI_API_KEY"
    """Environment variable holding the API key (its name only is ever in a config)."""
    concurrency: int = 8
    """Requests in flight at once (also the chunk a budget is checked between)."""
    timeout: float = 120.0
    """Seconds one request may take before it is retried."""
    retries: int = 3
    """Attempts after the first (timeouts, connection errors, 429, 5xx)."""
    backoff: float = 0.5
    """Seconds before the first retry, doubled per retry."""
    cache: str = "memory"
    """``memory`` (identical requests sent once per run), ``off``, or an SQLite file kept across runs."""
    logprobs: bool = True
    """Ask for token log-probabilities (P(yes) for ``reward_from="soft"``)."""
    k: int = 1
    """Judgments sampled per prompt (majority vote)."""
    temperature: float = 0.0
    """Sampling temperature (0: greedy; with ``k > 1`` use > 0)."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_new_tokens: int = 512
    """Longest judgment."""
    seed: int | None = None
    """Sampling seed (``None``: the server's)."""
    reward_from: str = "verdict"
    """``verdict`` (the voted yes/no) or ``soft`` (P(yes) from log-probabilities, when the server gives
    them; else the verdict)."""
    system_prompt: str | None = None
    """Optional system message."""
    price: dict[str, float] | None = None
    """``{"prompt": USD, "completion": USD}`` per 1M tokens (default: the ``prices`` file's or the built-in
    table's entry for ``model``); makes ``cost_usd`` part of the usage."""
    prices: str | None = None
    """A JSON or YAML file of prices by model name."""
    budget_usd: float | None = None
    """Most USD the source may spend (needs a price); then rows are ``judge budget exhausted`` errors."""
    budget_tokens: int | None = None
    """Most tokens (prompt + completion) the source may spend."""

    def __post_init__(self) -> None:
        known = REMOTE_BACKENDS + LOCAL_BACKENDS
        if self.backend not in known:
            raise ValueError(f"unknown judge backend {self.backend!r} (known: {', '.join(known)})")
        if self.reward_from not in ("verdict", "soft"):
            raise ValueError("reward_from must be 'verdict' or 'soft'")
        if self.backend in REMOTE_BACKENDS:
            if not self.base_url:
                raise ValueError(
                    "the judge needs base_url: its server's API root, e.g. http://127.0.0.1:8000/v1"
                )
            self.api_config()  # checks the server settings now
        else:
            if not self.model:
                raise ValueError(f"the {self.backend} judge backend needs model (a folder or hub name)")
            spending = [n for n in ("price", "prices", "budget_usd", "budget_tokens") if getattr(self, n)]
            if spending:
                raise ValueError(f"{', '.join(spending)}: only with backend openai (a server's token usage)")
        if self.k < 1:
            raise ValueError("k must be >= 1")

    def api_config(self) -> ChatAPIConfig:
        """The ``openai`` backend's settings."""
        price = as_price(self.price) if self.price is not None else None
        return ChatAPIConfig(
            base_url=str(self.base_url),
            api_key_env=self.api_key_env,
            concurrency=self.concurrency,
            timeout=self.timeout,
            retries=self.retries,
            backoff=self.backoff,
            cache=self.cache,
            logprobs=self.logprobs,
            price_prompt=price.prompt if price else None,
            price_completion=price.completion if price else None,
            prices=self.prices,
            budget_usd=self.budget_usd,
            budget_tokens=self.budget_tokens,
        )

    def build_judge(self, mode: str, **judge_config: Any) -> LLMJudge:
        """The :class:`LLMJudge` these settings describe, in ``mode``."""
        backend_kwargs = {"config": self.api_config()} if self.backend in REMOTE_BACKENDS else None
        return LLMJudge(
            self.model,
            backend=self.backend,
            backend_kwargs=backend_kwargs,
            mode=mode,
            k=self.k,
            temperature=self.temperature,
            top_p=self.top_p,
            max_new_tokens=self.max_new_tokens,
            seed=self.seed,
            reward_from=self.reward_from,
            system_prompt=self.system_prompt,
            **judge_config,
        )


@dataclass
class JudgeSourceConfig(JudgeSettings):
    """Settings of the ``judge`` reward source: :class:`JudgeSettings`' and these."""

    template: str = "binary"
    """The template of rows without a reference answer (a built-in name, a file or the text)."""
    reference_template: str = "genrm_verify"
    """The template of rows with a reference answer (GenRM's verification against it)."""


@dataclass
class RubricSourceConfig(JudgeSettings):
    """Settings of the ``rubric`` reward source: :class:`JudgeSettings`' and these."""

    aggregation: str = "explicit"
    """``explicit`` (RaR-Explicit: a verdict per criterion, weighted) or ``implicit`` (RaR-Implicit: one 1-10
    score given the whole rubric)."""
    rubric_field: str = "rubric"
    """The row's field holding its rubric (a metadata key: a column of the input file); a row without it is
    scored against its ``reference`` when that is a rubric, else it is an error row."""
    scale: tuple[int, int] = (1, 10)
    """``implicit``: the judge's score range (RaR: 1-10)."""
    criterion_template: str = "rubric_criterion"
    """``explicit``: the prompt asking whether a response meets one criterion (a built-in name, a file or the
    text, with ``{prompt}``, ``{response}``, ``{criterion}``; it must ask for ``Verdict: yes|no``)."""
    pitfall_template: str = "rubric_pitfall"
    """``explicit``: the prompt asking whether a response makes the mistake a pitfall describes (yes: made)."""
    implicit_template: str = "rubric_implicit"
    """``implicit``: the prompt giving the whole rubric (``{rubric}``) and asking for a score on ``scale``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.aggregation not in ("explicit", "implicit"):
            raise ValueError("aggregation must be 'explicit' or 'implicit'")
        if not isinstance(self.rubric_field, str) or not self.rubric_field:
            raise ValueError("rubric_field must be a field name")
        self.scale = (int(self.scale[0]), int(self.scale[1]))


def _settings(cls: type, config: dict[str, Any]) -> Any:
    """``cls(**config)`` with an unknown key refused in one line naming the known ones."""
    known = [f.name for f in fields(cls)]
    unknown = sorted(set(config) - set(known))
    if unknown:
        raise TypeError(f"unknown setting {unknown[0]!r} (known: {', '.join(known)})")
    return cls(**config)


class _JudgeSourceBase:
    """What both sources share: the judge, usage and close."""

    runs_in_process = True
    """Scored in the calling process (the judge's requests run in threads; nothing to gain from workers)."""

    judge: LLMJudge

    def usage(self) -> dict[str, float] | None:
        """What the judge's server used (requests, cache hits, retries, failures, tokens, ``cost_usd`` with a
        price); ``None`` for a local judge."""
        return self.judge.usage()

    def close(self) -> None:
        self.judge.close()

    def score(self, record: Record) -> Result:
        return self.score_batch([record])[0]

    def score_batch(self, records: Sequence[Record]) -> list[Result]:  # pragma: no cover - abstract
        raise NotImplementedError


class RubricSource(_JudgeSourceBase):
    """Rubrics as rewards (see the module docstring); keyword arguments are :class:`RubricSourceConfig`'s.

    Raises:
        TypeError: an unknown setting. ValueError: a bad one. MissingExtraError: ``hf``/``vllm`` without
        the ``rm`` extra.
    """

    name = "rubric"

    @classmethod
    def summary_tallies(cls) -> dict[str, Any]:
        """``rewardlab score``'s and ``eval``'s running summary: the mean rubric score and, per category, the
        mean share of criteria met (:class:`~rewardlab.rewardmodels.judge.criteria.CriteriaTally`)."""
        return {"rubric": CriteriaTally()}

    def __init__(self, **settings: Any) -> None:
        self.config: RubricSourceConfig = _settings(RubricSourceConfig, settings)
        explicit = self.config.aggregation == "explicit"
        cfg = self.config
        if explicit:
            self.judge = cfg.build_judge("binary", template=cfg.criterion_template)
        else:
            self.judge = cfg.build_judge("score", template=cfg.implicit_template, scale=cfg.scale)
        self.criterion_template = get_template(cfg.criterion_template, "binary")
        self.pitfall_template = get_template(cfg.pitfall_template, "binary")
        self.implicit_template = get_template(cfg.implicit_template, "score")

    def rubric_of(self, record: Record) -> list[Criterion]:
        """The row's rubric (its :attr:`RubricSourceConfig.rubric_field`, else its reference when that is a
        rubric).

        Raises:
            ValueError: no rubric, or a malformed one (one line).
        """
        field = self.config.rubric_field
        value = (record.metadata or {}).get(field)
        if value in (None, "", []):
            value = record.reference if _is_rubric_like(record.reference) else None
        if value is None:
            raise ValueError(f"the row has no {field!r} field and its reference is not a rubric")
        return parse_rubric(value)

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        """One result per record, in order; every prompt of the batch goes to the judge in one call."""
        results: list[Result | None] = [None] * len(records)
        rubrics: dict[int, list[Criterion]] = {}
        for i, record in enumerate(records):
            try:
                rubrics[i] = self.rubric_of(record)
            except ValueError as exc:
                results[i] = Result.failure(f"rubric error: {exc}", aggregation=self.config.aggregation)
        if self.config.aggregation == "explicit":
            self._explicit(records, rubrics, results)
        else:
            self._implicit(records, rubrics, results)
        return [r if r is not None else Result.failure("judge error: no judgment") for r in results]

    # -- explicit -------------------------------------------------------------------------------------------------
    def criterion_prompt(self, record: Record, criterion: Criterion) -> Any:
        """The judge prompt of one criterion: question, response and criterion only (a repeated criterion is
        the same request)."""
        template = self.pitfall_template if criterion.is_pitfall else self.criterion_template
        text = render(
            template, prompt=record.prompt_text, response=record.completion_text, criterion=criterion.text
        )
        return self.judge.wrap_prompt(text)

    def _explicit(
        self, records: Sequence[Record], rubrics: dict[int, list[Criterion]], results: list[Result | None]
    ) -> None:
        prompts = [self.criterion_prompt(records[i], c) for i, criteria in rubrics.items() for c in criteria]
        outcomes = iter(self.judge.run(prompts))
        for i, criteria in rubrics.items():
            results[i] = self._explicit_row(criteria, [next(outcomes) for _ in criteria])

    def _explicit_row(self, criteria: list[Criterion], outcomes: list[list[Judgment] | Failed]) -> Result:
        entries: list[dict[str, Any]] = []
        shares: list[float] = []
        verdicts: list[bool] = []
        error: str | None = None
        for j, (criterion, outcome) in enumerate(zip(criteria, outcomes, strict=True)):
            judged = self._criterion_verdict(criterion, outcome)
            if isinstance(judged, str):
                error = error or _criterion_error(j, criterion, judged)
                first = outcome[0].text if not isinstance(outcome, Failed) and outcome else ""
                entries.append(criterion_details(criterion, verdict_text=first))
                continue
            met, p_yes, text = judged
            entries.append(criterion_details(criterion, met, p_yes, text))
            soft = self.config.reward_from == "soft" and p_yes is not None
            shares.append(p_yes if soft else float(met))  # type: ignore[arg-type]
            verdicts.append(met)
        if error is not None:
            return Result.failure(error, criteria=entries, aggregation="explicit", rubric_score=None)
        reward = explicit_reward(criteria, shares, verdicts)
        return Result(
            reward=reward, details={"criteria": entries, "aggregation": "explicit", "rubric_score": reward}
        )

    def _criterion_verdict(
        self, criterion: Criterion, outcome: list[Judgment] | Failed
    ) -> tuple[bool, float | None, str] | str:
        """``(met, P(yes), the judge's first output)``, or why there is no verdict. A tied vote counts against
        the response (a criterion unmet, a pitfall made): never a guess in its favour."""
        if isinstance(outcome, Failed):
            return request_error(outcome.error)
        decided = self.judge.decide(outcome)
        if decided.error is not None:
            return decided.error
        verdict = decided.details["verdict"]
        met = criterion.is_pitfall if verdict == "tie" else verdict == "yes"
        return met, decided.details.get("soft_score"), outcome[0].text

    # -- implicit -------------------------------------------------------------------------------------------------
    def _implicit(
        self, records: Sequence[Record], rubrics: dict[int, list[Criterion]], results: list[Result | None]
    ) -> None:
        prompts = []
        for i, criteria in rubrics.items():
            record = records[i]
            text = render(
                self.implicit_template,
                prompt=record.prompt_text,
                response=record.completion_text,
                rubric=rubric_text(criteria),
            )
            prompts.append(self.judge.wrap_prompt(text))
        for (i, criteria), outcome in zip(rubrics.items(), self.judge.run(prompts), strict=True):
            entries = [criterion_details(c) for c in criteria]
            if isinstance(outcome, Failed):
                results[i] = Result.failure(
                    request_error(outcome.error), criteria=entries, aggregation="implicit", rubric_score=None
                )
                continue
            decided = self.judge.decide(outcome)
            details = {**decided.details, "criteria": entries, "aggregation": "implicit"}
            if decided.error is not None:
                results[i] = Result.failure(decided.error, **details, rubric_score=None)
                continue
            reward = implicit_reward(details["score"], self.config.scale)
            details["rubric_score"] = reward
            details["verdict_text"] = outcome[0].text[:500]
            results[i] = Result(reward=reward, details=details)


class JudgeSource(_JudgeSourceBase):
    """A generative verifier (see the module docstring); keyword arguments are :class:`JudgeSourceConfig`'s.

    Raises:
        TypeError: an unknown setting. ValueError: a bad one. MissingExtraError: ``hf``/``vllm`` without
        the ``rm`` extra.
    """

    name = "judge"

    def __init__(self, **settings: Any) -> None:
        self.config: JudgeSourceConfig = _settings(JudgeSourceConfig, settings)
        self.judge = self.config.build_judge("binary", template=self.config.template)
        self.template = get_template(self.config.template, "binary")
        self.reference_template = get_template(self.config.reference_template, "binary")

    def prompt_of(self, record: Record) -> tuple[Any, str]:
        """The judge prompt of a row and the name of its template (``reference_template`` when the row has a
        reference answer)."""
        reference = _reference_text(record.reference)
        if reference is None:
            text = render(self.template, prompt=record.prompt_text, response=record.completion_text)
            return self.judge.wrap_prompt(text), self.config.template
        text = render(
            self.reference_template,
            prompt=record.prompt_text,
            response=record.completion_text,
            reference=reference,
        )
        return self.judge.wrap_prompt(text), self.config.reference_template

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        """One result per record, in order, from one judge call."""
        prompts, names = zip(*(self.prompt_of(r) for r in records), strict=True) if records else ((), ())
        results = []
        for name, outcome in zip(names, self.judge.run(prompts), strict=True):
            if isinstance(outcome, Failed):
                results.append(Result.failure(request_error(outcome.error), template=name))
                continue
            decided = self.judge.decide(outcome)
            decided.details["template"] = name
            results.append(decided)
        return results


def _reference_text(reference: Any) -> str | None:
    """A reference answer as text (a string or a number; ``None`` for none, an empty one or a structure)."""
    if isinstance(reference, bool) or not isinstance(reference, str | int | float):
        return None
    text = str(reference).strip()
    return text or None


def _is_rubric_like(reference: Any) -> bool:
    """Whether a reference is meant as a rubric: a list, a ``{"rubric": [...]}``, or JSON text of a list."""
    if isinstance(reference, list | tuple):
        return True
    if isinstance(reference, dict):
        return "rubric" in reference
    return isinstance(reference, str) and reference.lstrip().startswith("[")


def _criterion_error(index: int, criterion: Criterion, why: str) -> str:
    """A row's error for a criterion without a verdict: the budget's message as it is, else which criterion."""
    if why.startswith(BUDGET_EXHAUSTED):
        return why
    return f"criterion {index} ({criterion.text[:60]!r}): {why}"


def check_source_settings(cls: type, name: str, config: dict[str, Any], where: str) -> None:
    """Checks a ``judge`` / ``rubric`` source's settings before anything loads (RL's config check).

    Raises:
        ConfigError: naming ``where.kwargs``.
    """
    try:
        _settings(cls, dict(config))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}.kwargs: {name}: {exc}") from None


def check_judge_source(name: str, config: dict[str, Any], where: str) -> None:
    """:func:`check_source_settings` of the ``judge`` kind."""
    check_source_settings(JudgeSourceConfig, name, config, where)


def check_rubric_source(name: str, config: dict[str, Any], where: str) -> None:
    """:func:`check_source_settings` of the ``rubric`` kind."""
    check_source_settings(RubricSourceConfig, name, config, where)


__all__ = [
    "JudgeSettings",
    "JudgeSource",
    "JudgeSourceConfig",
    "RubricSource",
    "RubricSourceConfig",
    "check_judge_source",
    "check_rubric_source",
]
