"""The judge's ``openai`` backend: judgments from any OpenAI-compatible chat-completions server (``vllm serve``,
TGI, SGLang, a hosted API), with no local model or tokenizer.

Each judge prompt is sent as chat messages (the system prompt, if any, and the rendered template as the user
message; the server applies its own chat template) to ``POST {base_url}/chat/completions`` with ``n = k``
samples, ``temperature``, ``top_p``, ``max_tokens``, ``seed`` and, unless turned off, ``logprobs: true``. A
server that returns fewer than ``n`` choices (one that ignores ``n``) is asked again, one sample per request,
until there are ``n``; ``n_per_request=False`` always sends ``k`` requests of one sample.

* **Per-row errors**: a request that fails after its retries (:class:`rewardlab.remote.HTTPClient`: timeouts,
  connection errors, 429 and 5xx retried with backoff; other 4xx not) makes its row
  ``"judge request failed: <why>"``; the other rows are judged.
* **Cache**: identical requests (the canonical JSON of URL and body) are sent once: within a batch, across
  batches, and with ``cache=PATH`` across runs (an SQLite file), so a repeated or resumed run does not pay
  twice. ``cache="off"`` sends every request.
* **Usage**: :meth:`ChatAPIBackend.usage` totals prompt and completion tokens (as the server reports them),
  requests, cache hits, retries and failures; ``rewardlab rm judge`` prints them and writes them into the run
  record.
* **Soft scores**: with log-probabilities, each choice carries its tokens' text and log-probability
  (``logprobs.content[j].token`` / ``.logprob``); the verdict's probability is read from the tokens that
  cover its characters (:func:`rewardlab.rewardmodels.judge.judge.span_probability`).
* **Cost and budget**: with a price (``price_prompt`` / ``price_completion``, a ``prices`` file, or the
  built-in table of :mod:`rewardlab.rewardmodels.judge.cost` for a known model) the usage has ``cost_usd``.
  With ``budget_usd`` and/or ``budget_tokens`` the requests a batch must send go out in chunks of
  ``concurrency``; before each chunk the backend compares what the run has spent (the tokens the server
  reported) with the budget, and once it is spent the remaining prompts are not sent: each is
  ``Failed("judge budget exhausted: spent $X of $Y")``. The overshoot is bounded by one chunk: a run spends
  at most its budget plus what ``concurrency`` requests cost (per thread calling :meth:`generate` at once).
  Cache hits cost nothing and are served whatever the budget.
* **API key**: read from the environment variable ``api_key_env`` (default ``OPENAI_API_KEY``); unset means no
  ``Authorization`` header (local servers). Only the variable's name is ever part of a config or a record.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.remote import Failed, HTTPClient, RemoteError, ResponseCache, cache_key
from rewardlab.rewardmodels.judge.cost import Budget, Price, resolve_price


@dataclass
class ChatAPIConfig:
    """Settings of the judge's ``openai`` backend (each is a ``rewardlab rm judge`` flag)."""

    base_url: str = "http://127.0.0.1:8000/v1"
    """The server's OpenAI API root: requests go to ``{base_url}/chat/completions``."""
    api_key_env: str | None = "OPENAI_API_KEY"
    """Environment variable holding the API key (sent as a bearer token; unset: no Authorization header)."""
    concurrency: int = 8
    """Requests in flight at once."""
    timeout: float = 120.0
    """Seconds one request may take; then it is retried, and after the retries its row is an error."""
    retries: int = 3
    """Attempts after the first on a timeout, a connection error, HTTP 429 or 5xx."""
    backoff: float = 0.5
    """Seconds before the first retry, doubled per retry (with jitter)."""
    cache: str = "memory"
    """``memory`` (identical requests are sent once per run), ``off``, or a file path (an SQLite cache kept
    across runs)."""
    logprobs: bool = True
    """Ask for token log-probabilities (soft scores); turn off for servers that refuse them."""
    n_per_request: bool = True
    """Ask for all ``k`` samples in one request (``n = k``); ``false``: ``k`` requests of one sample."""
    price_prompt: float | None = None
    """USD per million prompt tokens of the judge model (with ``price_completion``; default: the ``prices``
    file's or the built-in table's entry for the model)."""
    price_completion: float | None = None
    """USD per million completion tokens of the judge model."""
    prices: str | None = None
    """A JSON or YAML file of prices by model name: ``{MODEL: {prompt: USD, completion: USD}}`` per 1M tokens."""
    budget_usd: float | None = None
    """Most USD this run may spend (needs a price); once spent, the rows left are error rows, not sent."""
    budget_tokens: int | None = None
    """Most tokens (prompt + completion) this run may spend; once spent, the rows left are error rows."""

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http:// or https:// URL, got {self.base_url!r}")
        if self.concurrency < 1 or not (self.timeout > 0) or self.retries < 0 or self.backoff < 0:
            raise ValueError("concurrency >= 1, timeout > 0, retries >= 0 and backoff >= 0 are needed")
        if (self.price_prompt is None) != (self.price_completion is None):
            raise ValueError("give price_prompt and price_completion together (USD per 1M tokens)")
        if self.price_prompt is not None:
            Price(self.price_prompt, self.price_completion)  # checks the values  # type: ignore[arg-type]
        Budget(self.budget_usd, self.budget_tokens)  # checks the values

    @property
    def price(self) -> Price | None:
        """The price given for the run, if any."""
        if self.price_prompt is None or self.price_completion is None:
            return None
        return Price(self.price_prompt, self.price_completion)

    @property
    def budget(self) -> Budget | None:
        """The run's budget, if any."""
        if self.budget_usd is None and self.budget_tokens is None:
            return None
        return Budget(self.budget_usd, self.budget_tokens)


@dataclass
class ChatGeneration:
    """One sampled chat completion.

    Attributes:
        text: The assistant message's content.
        tokens: Each generated token's text (with log-probabilities), else ``None``.
        logprobs: Each generated token's log-probability, else ``None``.
        finish_reason: As the server reports it (``stop``, ``length``...).
    """

    text: str
    tokens: list[str] | None = None
    logprobs: list[float] | None = None
    finish_reason: str | None = None


USAGE_KEYS = ("requests", "cached", "retries", "failures", "prompt_tokens", "completion_tokens")


class ChatAPIBackend:
    """Judge prompts (chat messages) through an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model: The model name the server serves; ``None``: the first one ``GET {base_url}/models`` lists.
        config: A :class:`ChatAPIConfig`; keyword arguments override its fields.
    """

    name = "openai"
    takes_messages = True
    """The judge sends chat messages, not text wrapped in a local chat template."""

    def __init__(
        self, model: str | None = None, config: ChatAPIConfig | None = None, **overrides: Any
    ) -> None:
        if config is None:
            config = ChatAPIConfig(**overrides)
        elif overrides:
            from dataclasses import replace

            config = replace(config, **overrides)
        self.config = config
        self.model = model
        self.client = HTTPClient.from_settings(config.base_url, config)
        self.url = f"{self.client.base_url}/chat/completions"
        self.cache = (
            None
            if config.cache == "off"
            else ResponseCache(None if config.cache == "memory" else config.cache)
        )
        self._lock = threading.Lock()
        self._tokens = {"prompt_tokens": 0, "completion_tokens": 0, "cached": 0}
        self.budget = config.budget
        self.price = resolve_price(model, config.price, config.prices)
        if self.budget is not None and self.budget.usd is not None and self.price is None:
            raise ValueError(
                f"budget_usd needs the judge model's price: model {model!r} is not in the built-in table "
                "(give price_prompt and price_completion, or a prices file)"
            )

    # -- the backend interface --------------------------------------------------------------------------------
    def generate(
        self, prompts: Sequence[list[dict[str, str]]], params: Any
    ) -> list[list[ChatGeneration] | Failed]:
        """``params.n`` generations per prompt, in order; :class:`~rewardlab.remote.Failed` for a prompt whose
        request failed for good."""
        if not prompts:
            return []
        model = self._model_name()
        if isinstance(model, Failed):
            return [model for _ in prompts]
        wanted = max(1, int(params.n))
        bodies = [self._body(model, messages, params) for messages in prompts]
        if self.cache is None:  # every prompt its own request, identical ones included
            fetched = self._fetch(bodies, wanted)
            return [self._generations(answer) for answer in fetched]
        keys = [cache_key(self.url, {"request": body, "samples": wanted}) for body in bodies]
        answers: dict[str, Any] = {}
        todo: dict[str, dict[str, Any]] = {}
        for key, body in zip(keys, bodies, strict=True):
            hit = None if key in todo else self.cache.get(key)
            if key in todo or hit is not None:  # asked earlier in this batch, or answered before
                self._add("cached", 1)
                if hit is not None:
                    answers[key] = hit
            else:
                todo[key] = body
        fetched = self._fetch(list(todo.values()), wanted)
        for key, answer in zip(todo, fetched, strict=True):
            answers[key] = answer
            if not isinstance(answer, Failed):
                self.cache.put(key, answer)
        return [self._generations(answers[key]) for key in keys]

    def usage(self) -> dict[str, float]:
        """Requests made (retries not counted), cache hits, retries, failed requests, tokens, and
        ``cost_usd`` when the model has a price."""
        with self._lock:
            totals = {**self.client.stats, **self._tokens}
        usage: dict[str, float] = {key: int(totals.get(key, 0)) for key in USAGE_KEYS}
        cost = self.cost_usd()
        if cost is not None:
            usage["cost_usd"] = round(cost, 6)
        return usage

    def cost_usd(self) -> float | None:
        """What the tokens this backend used cost, or ``None`` without a price."""
        with self._lock:
            prompt, completion = self._tokens["prompt_tokens"], self._tokens["completion_tokens"]
        return None if self.price is None else self.price.cost(prompt, completion)

    def budget_left(self) -> str | None:
        """``None`` while the budget (if any) is not spent; else the error of a row not sent."""
        if self.budget is None:
            return None
        with self._lock:
            tokens = self._tokens["prompt_tokens"] + self._tokens["completion_tokens"]
        return self.budget.exhausted(self.cost_usd(), tokens)

    def close(self) -> None:
        self.client.close()
        if self.cache is not None:
            self.cache.close()

    # -- requests ---------------------------------------------------------------------------------------------
    def _add(self, key: str, n: int) -> None:
        with self._lock:
            self._tokens[key] += n

    def _fetch(self, bodies: list[dict[str, Any]], wanted: int) -> list[Any]:
        """The answers of ``bodies``, ``concurrency`` at a time; with a budget, a chunk at a time, each sent
        only while the budget is not spent (the others: ``Failed`` with the budget's message)."""
        if self.budget is None:
            return self.client.map(lambda body: self._sample(body, wanted), bodies)
        answers: list[Any] = []
        step = self.config.concurrency
        for start in range(0, len(bodies), step):
            spent = self.budget_left()
            if spent is not None:
                answers += [Failed(spent)] * (len(bodies) - start)
                break
            answers += self.client.map(lambda body: self._sample(body, wanted), bodies[start : start + step])
        return answers

    def _model_name(self) -> str | Failed:
        """The configured model, or the first one the server lists (asked once)."""
        if self.model:
            return self.model
        try:
            listed = self.client.request("GET", "/models")
            self.model = str(listed["data"][0]["id"])
            if self.price is None:  # the listed model may be one the table prices
                self.price = resolve_price(self.model, self.config.price, self.config.prices)
        except RemoteError as exc:
            return Failed(f"cannot list the server's models: {exc}")
        except (KeyError, IndexError, TypeError):
            return Failed("cannot list the server's models: GET /models has no data[0].id (give --model)")
        except Exception as exc:  # noqa: BLE001 - every row fails with the reason, the run goes on
            return Failed(f"cannot list the server's models: {type(exc).__name__}: {exc}")
        return self.model

    def _body(self, model: str, messages: list[dict[str, str]], params: Any) -> dict[str, Any]:
        n = max(1, int(params.n))
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "n": n if self.config.n_per_request else 1,
            "temperature": max(0.0, float(params.temperature)),
            "top_p": float(params.top_p),
            "max_tokens": int(params.max_new_tokens),
        }
        if params.seed is not None:
            body["seed"] = int(params.seed)
        if self.config.logprobs:
            body["logprobs"] = True
        return body

    def _sample(self, request: dict[str, Any], wanted: int) -> dict[str, Any]:
        """``wanted`` choices for one request (topped up one request at a time when the server sent fewer)."""
        choices = self._choices(request)
        extra = 0
        while len(choices) < wanted:
            extra += 1
            one = {**request, "n": 1}
            if "seed" in one:
                one["seed"] = request["seed"] + extra  # the same seed would sample the same judgment
            got = self._choices(one)
            if not got:
                raise RemoteError("malformed response: no choices", "malformed")
            choices += got
        return {"choices": choices[:wanted]}

    def _choices(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        answer = self.client.request("POST", "/chat/completions", request)
        if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list):
            raise RemoteError("malformed response: no 'choices' list", "malformed")
        usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else {}
        for key in ("prompt_tokens", "completion_tokens"):
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                self._add(key, value)
        ordered = sorted(answer["choices"], key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
        return [_choice(c) for c in ordered]

    def _generations(self, answer: Any) -> list[ChatGeneration] | Failed:
        if isinstance(answer, Failed):
            return answer
        return [ChatGeneration(**choice) for choice in answer["choices"]]


def _choice(choice: Any) -> dict[str, Any]:
    """A choice of the server's answer as :class:`ChatGeneration` fields (JSON, so that it can be cached)."""
    if not isinstance(choice, dict):
        raise RemoteError(f"malformed response: a choice is {type(choice).__name__}", "malformed")
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    text = message.get("content") or ""
    out: dict[str, Any] = {"text": str(text), "finish_reason": choice.get("finish_reason")}
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if isinstance(content, list) and content:
        try:
            out["tokens"] = [str(item["token"]) for item in content]
            out["logprobs"] = [float(item["logprob"]) for item in content]
        except (KeyError, TypeError, ValueError):  # unreadable: no soft score, the verdict still counts
            out.pop("tokens", None)
            out.pop("logprobs", None)
    return out


__all__ = ["ChatAPIBackend", "ChatAPIConfig", "ChatGeneration"]
