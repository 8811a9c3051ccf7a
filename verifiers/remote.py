"""The ``http:`` reward source: records posted in batches to a user's reward server, rewards read back.

A source named ``http:URL`` (``http:http://127.0.0.1:8000/reward``; a bare ``http://...`` or ``https://...``
is the same) is accepted wherever a verifier name is: ``rewardlab score --verifier``, ``rewardlab eval
--verifier``, RL's ``reward.sources[].name``; settings come from ``--config KEY=VALUE`` / ``kwargs``
(:class:`HTTPSourceConfig`). The protocol (docs/remote.md):

``protocol: rewardlab`` (default)
    ``POST URL {"records": [{"id", "prompt", "completion", "reference", "metadata"}, ...]}``, answered with
    ``{"rewards": [float | null, ...]}`` or ``{"results": [{"reward": float | null, "details": {...},
    "error": str | null}, ...]}`` (``score`` is read where ``reward`` is absent: verl's ``compute_score``
    dicts), one entry per record, in order.
``protocol: openrlhf``
    OpenRLHF's ``--remote_rm_url`` request, ``{"query": [prompt + completion, ...], "prompts": [...],
    "labels": [...]}``, answered with ``{"rewards": [...]}``.

Every failure is an error row, never a stopped run: a batch that fails after its retries (timeout, dropped
connection, HTTP 5xx/429) gives each of its rows ``"reward server: <why>"``; an answer that is not JSON or
has the wrong number of entries is an error for that batch's rows; an entry that is not a number is that
row's error; ``null`` (or NaN) is a missing reward. Requests go through :class:`rewardlab.remote.HTTPClient`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rewardlab.config import ConfigError, build
from rewardlab.remote import Failed, HTTPClient
from rewardlab.types import Record, Result, jsonable

PREFIXES = ("http:", "https:")
"""How an ``http:URL`` source name starts (a bare ``http://...`` / ``https://...`` URL is one too)."""
PROTOCOLS = ("rewardlab", "openrlhf")
ERROR_PREFIX = "reward server"
"""Every error of this source starts so (the summary groups errors by the text before the first colon)."""


@dataclass
class HTTPSourceConfig:
    """Settings of an ``http:`` reward source (``--config KEY=VALUE`` of ``rewardlab score``, ``kwargs`` of an
    RL reward source)."""

    protocol: str = "rewardlab"
    """Request and answer shape: ``rewardlab`` (records in, rewards or results out) or ``openrlhf``
    (``query`` / ``prompts`` / ``labels`` in, ``rewards`` out)."""
    batch_size: int = 32
    """Records per request."""
    concurrency: int = 4
    """Requests in flight at once."""
    timeout: float = 60.0
    """Seconds one request may take (connect to last byte); then it is retried or its rows fail."""
    retries: int = 3
    """Attempts after the first on a timeout, a connection error, HTTP 429 or 5xx."""
    backoff: float = 0.5
    """Seconds before the first retry, doubled per retry (with jitter)."""
    api_key_env: str | None = None
    """Environment variable holding a bearer token for the ``Authorization`` header (the value is never
    written anywhere; unset: no header)."""

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, not {self.protocol!r}")
        if self.batch_size < 1 or self.concurrency < 1:
            raise ValueError("batch_size and concurrency must be >= 1")
        if not (self.timeout > 0 and math.isfinite(self.timeout)) or self.retries < 0 or self.backoff < 0:
            raise ValueError("timeout must be a finite number > 0, retries and backoff >= 0")


def is_remote(name: Any) -> bool:
    """Whether a source name names a reward server (``http:URL``, ``http://...``, ``https://...``)."""
    return isinstance(name, str) and name.startswith(PREFIXES)


def remote_url(name: str) -> str:
    """The server URL of an ``http:`` source name.

    Raises:
        ValueError: the name holds no ``http://`` or ``https://`` URL.
    """
    url = name if name.startswith(("http://", "https://")) else name.split(":", 1)[1]
    if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1]) == 0:
        raise ValueError(f"{name!r}: an http source is http:URL, e.g. http:http://127.0.0.1:8000/reward")
    return url


def http_config(values: dict[str, Any] | None, where: str = "http source") -> HTTPSourceConfig:
    """The source's settings from ``--config`` / ``kwargs`` values (unknown keys and bad values refused).

    Raises:
        ValueError (``ConfigError``): an unknown key or a bad value, in one line.
    """

    return build(HTTPSourceConfig, dict(values or {}), where)


def check_http_source(name: str, config: dict[str, Any] | None, where: str) -> None:
    """Checks an ``http:`` source's name and settings before a run starts (the ``http:URL`` kind's check in
    :mod:`rewardlab.verifiers.sources`); ``where`` is the source's config path.

    Raises:
        ConfigError: naming ``where.name`` (no URL) or ``where.kwargs`` (an unknown key or a bad value).
    """
    try:
        remote_url(name)
    except ValueError as exc:
        raise ConfigError(f"{where}.name: {exc}") from None
    http_config(config, f"{where}.kwargs")


class HTTPRewardSource:
    """A reward server as a reward source (see the module docstring); ``score_batch`` never raises.

    Args:
        name: ``http:URL`` (or the bare URL).
        **config: :class:`HTTPSourceConfig` fields.
    """

    runs_in_process = True  # no worker pool: the requests are I/O, timed out and retried here
    concurrent_batches = True  # its client is safe from several threads (one concurrency limit for all)

    def __init__(self, name: str, **config: Any) -> None:
        self.url = remote_url(name)
        self.name = name if name.startswith("http:") else f"http:{name}"
        self.settings = http_config(config)
        # What a run record writes: the settings, the key's variable name, never its value.
        self.config = asdict(self.settings)
        self.client = HTTPClient.from_settings(self.url, self.settings)

    # -- the reward-source interface ------------------------------------------------------------------------
    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        """One result per record, in order: batches of ``batch_size`` posted ``concurrency`` at a time."""
        size = self.settings.batch_size
        batches = [list(records[i : i + size]) for i in range(0, len(records), size)]
        answers = self.client.map(self._post, batches)
        out: list[Result] = []
        for batch, answer in zip(batches, answers, strict=True):
            if isinstance(answer, Failed):
                out.extend(_failure(answer.error) for _ in batch)
            else:
                out.extend(answer)
        return out

    def score(self, record: Record) -> Result:
        return self.score_batch([record])[0]

    def usage(self) -> dict[str, int]:
        """Requests made, retries and failed requests so far."""
        return dict(self.client.stats)

    def close(self) -> None:
        self.client.close()

    # -- one batch -----------------------------------------------------------------------------------------
    def _post(self, batch: list[Record]) -> list[Result]:
        body = request_body(batch, self.settings.protocol)
        return parse_answer(self.client.request("POST", "", body), len(batch))


def request_body(records: Sequence[Record], protocol: str = "rewardlab") -> dict[str, Any]:
    """The JSON request of a batch in ``protocol``."""
    if protocol == "openrlhf":
        return {
            "query": [r.prompt_text + r.completion_text for r in records],
            "prompts": [r.prompt_text for r in records],
            "labels": [jsonable(r.reference) for r in records],
        }
    rows = [
        {
            "id": r.id,
            "prompt": r.prompt,
            "completion": r.completion,
            "reference": r.reference,
            "metadata": r.metadata,
        }
        for r in records
    ]
    return {"records": jsonable(rows)}


def parse_answer(answer: Any, n: int) -> list[Result]:
    """The results of a batch of ``n`` records from the server's decoded answer; a malformed answer is an
    error for each row, a malformed entry that row's error."""
    if isinstance(answer, dict) and isinstance(answer.get("results"), list):
        entries, read = answer["results"], _from_result
    elif isinstance(answer, dict) and isinstance(answer.get("rewards"), list):
        entries, read = answer["rewards"], _from_reward
    else:
        got = (
            f"an object with keys {sorted(answer)[:5]}" if isinstance(answer, dict) else type(answer).__name__
        )
        return [_failure(f"malformed response: expected 'rewards' or 'results', got {got}") for _ in range(n)]
    if len(entries) != n:
        return [_failure(f"malformed response: {len(entries)} entries for {n} records") for _ in range(n)]
    return [read(entry) for entry in entries]


def _from_reward(value: Any) -> Result:
    reward = _number(value)
    return reward if isinstance(reward, Result) else Result(reward=reward)


def _from_result(entry: Any) -> Result:
    if not isinstance(entry, dict):
        return _failure(f"malformed result: {type(entry).__name__} {entry!r:.80}, not an object")
    details = entry.get("details") if isinstance(entry.get("details"), dict) else {}
    if entry.get("error") is not None:
        return Result.failure(f"{ERROR_PREFIX}: {entry['error']!s:.500}", **details)
    reward = _number(entry.get("reward", entry.get("score")))
    if isinstance(reward, Result):
        return reward
    return Result(reward=reward, details=details)


def _number(value: Any) -> float | None | Result:
    """A reward value as a float, ``None`` for null / NaN (a missing reward), or the row's error."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _failure(f"reward is {type(value).__name__} {value!r:.80}, not a number")
    if math.isnan(value):
        return None
    if math.isinf(value):
        return _failure(f"reward is {value}, not a finite number")
    return float(value)


def _failure(why: str) -> Result:
    return Result.failure(f"{ERROR_PREFIX}: {why}")


__all__ = [
    "PROTOCOLS",
    "HTTPRewardSource",
    "HTTPSourceConfig",
    "http_config",
    "is_remote",
    "parse_answer",
    "remote_url",
    "request_body",
]
