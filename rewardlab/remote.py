"""The one HTTP client of the servers rewardlab calls: JSON requests with a concurrency limit, a deadline, retries
with backoff, errors classified in one line, and a cache of identical requests.

Used by the judge's OpenAI-compatible backend (``rewardmodels/judge/remote.py``) and the ``http:`` reward
source (``verifiers/remote.py``). Both turn a :class:`RemoteError` into an error row, never a stopped run.

* **Retried** (exponential backoff with jitter, ``Retry-After`` honoured up to ``max_backoff``): connection
  errors (refused, reset, dropped without a response), timeouts, HTTP 429 and 5xx.
* **Not retried**: other 4xx (the request itself is wrong), a body that is not JSON.
* **Timeout**: ``timeout`` seconds for the whole attempt (connect, send, wait, read), checked while the body
  streams in, so a server that hangs or trickles bytes fails in about ``timeout`` seconds.
* **Concurrency**: at most ``concurrency`` attempts in flight at once through one client, whatever the number
  of calling threads (:meth:`HTTPClient.map` runs a function over items with that many threads). A client is
  shared safely by threads; an attempt's ``timeout`` starts once it has its turn, not while it waits for one.
* **Secrets**: an API key is read from the environment variable named by ``api_key_env`` and sent as
  ``Authorization: Bearer ...``; it is kept only in the HTTP client's headers, never in a config, a message
  or a statistic.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")
R = TypeVar("R")

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
"""HTTP statuses worth another attempt (any other 5xx is retried too)."""

MAX_BODY_IN_ERROR = 200
"""Characters of an error response's body quoted in the error message."""


class RemoteError(RuntimeError):
    """A request that failed for good (after its retries); the message is one line: what went wrong.

    Attributes:
        kind: ``timeout``, ``connection``, ``http`` or ``malformed`` (not JSON, undecodable, a bad URL).
        status: The HTTP status for ``http`` errors.
        retryable: Whether another attempt could succeed (timeouts, connection errors, 429, 5xx).
        retry_after: Seconds the server asked to wait (its ``Retry-After`` header), if it said.
    """

    def __init__(
        self, message: str, kind: str, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.kind, self.status, self.retry_after = kind, status, retry_after
        self.retryable = kind in ("timeout", "connection") or (
            status is not None and (status in RETRY_STATUSES or status >= 500)
        )


class Failed(NamedTuple):
    """What :meth:`HTTPClient.map` returns for an item whose call raised: the one-line reason."""

    error: str


def api_key(env: str | None) -> str | None:
    """The API key in environment variable ``env`` (``None`` when unnamed, unset or empty)."""
    return (os.environ.get(env) or None) if env else None


def canonical_json(value: Any) -> str:
    """``value`` as the one JSON text every equal value has (sorted keys, no spaces): a cache key's source."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class HTTPClient:
    """JSON over HTTP with retries, a per-attempt deadline and a concurrency limit (see the module docstring).

    Args:
        base_url: Prefix of every request's URL (a path given to :meth:`request` is appended).
        timeout: Seconds one attempt may take, from connecting to the last byte of the answer.
        retries: Attempts after the first for retryable failures.
        backoff: Seconds before the first retry; doubles per retry (times a random factor in [0.5, 1]).
        max_backoff: Longest wait between attempts (also the cap of a server's ``Retry-After``).
        concurrency: Most attempts in flight at once.
        api_key_env: Environment variable holding a bearer token (``None`` or unset: no Authorization header).
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        concurrency: int = 8,
        api_key_env: str | None = None,
    ) -> None:
        import httpx

        if not (timeout > 0) or retries < 0 or backoff < 0 or concurrency < 1:
            raise ValueError("timeout must be > 0, retries and backoff >= 0, concurrency >= 1")
        self.base_url = base_url.rstrip("/")
        self.timeout, self.retries = float(timeout), int(retries)
        self.backoff, self.max_backoff = float(backoff), float(max_backoff)
        self.concurrency = int(concurrency)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = api_key(api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, 10.0)),
            limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
        )
        self._slots = threading.BoundedSemaphore(self.concurrency)
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "failures": 0}
        """Requests made (retries not counted), extra attempts, and requests that failed for good."""

    @classmethod
    def from_settings(cls, base_url: str, settings: Any) -> HTTPClient:
        """A client with the ``timeout``, ``retries``, ``backoff``, ``concurrency`` and ``api_key_env`` of a
        settings object (the judge backend's and the ``http:`` source's configs)."""
        return cls(
            base_url,
            timeout=settings.timeout,
            retries=settings.retries,
            backoff=settings.backoff,
            concurrency=settings.concurrency,
            api_key_env=settings.api_key_env,
        )

    def __repr__(self) -> str:  # never the headers: they may hold the API key
        return f"HTTPClient({self.base_url!r}, concurrency={self.concurrency}, timeout={self.timeout})"

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    def request(self, method: str, path: str = "", body: Any = None) -> Any:
        """The decoded JSON answer of ``method base_url+path`` with ``body``, retried as the module says.

        Raises:
            RemoteError: the last attempt's failure, with the attempts counted in the message when retried.
        """
        url = f"{self.base_url}{path}"
        content = None if body is None else json.dumps(body, ensure_ascii=False).encode()
        self._count("requests")
        attempt = 0
        while True:
            try:
                return self._attempt(method, url, content)
            except RemoteError as exc:
                if not exc.retryable or attempt >= self.retries:
                    self._count("failures")
                    if attempt:
                        exc.args = (f"{exc.args[0]} (after {attempt + 1} attempts)",)
                    raise
                wait = exc.retry_after
            attempt += 1
            self._count("retries")
            time.sleep(self._delay(attempt, wait))

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before attempt ``attempt`` (1 = the first retry): the server's ``Retry-After`` when it gave
        one, else ``backoff * 2**(attempt-1)`` with jitter; at most ``max_backoff``."""
        if retry_after is not None:
            return min(self.max_backoff, max(0.0, retry_after))
        base = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
        return base * random.uniform(0.5, 1.0)

    def _attempt(self, method: str, url: str, content: bytes | None) -> Any:
        import httpx

        with self._slots:
            # From the attempt's start: the time spent waiting for a slot (other threads' requests on this
            # client, e.g. the engine's request threads sharing one source) is not the server's.
            deadline = time.monotonic() + self.timeout
            try:
                with self._client.stream(method, url, content=content) as response:
                    chunks = []
                    for chunk in response.iter_bytes():
                        chunks.append(chunk)
                        if time.monotonic() > deadline:
                            raise httpx.ReadTimeout("deadline passed while reading the answer")
                    data = b"".join(chunks)
            except httpx.TimeoutException:
                raise RemoteError(f"timeout after {self.timeout:g}s", "timeout") from None
            except httpx.TransportError as exc:
                why = str(exc) or type(exc).__name__
                raise RemoteError(f"connection error: {why}", "connection") from None
            except (httpx.HTTPError, httpx.InvalidURL) as exc:  # undecodable body, redirect loop, bad URL
                raise RemoteError(f"request error: {type(exc).__name__}: {exc}", "malformed") from None
        if response.status_code >= 400:
            text = data.decode("utf-8", "replace").strip().replace("\n", " ")[:MAX_BODY_IN_ERROR]
            status, wait = response.status_code, _retry_after(response.headers.get("retry-after"))
            raise RemoteError(f"HTTP {status}: {text}", "http", status, wait)
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError as exc:
            raise RemoteError(f"malformed response: not JSON ({exc})", "malformed") from None

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R | Failed]:
        """``fn(item)`` for every item, ``concurrency`` at a time, in order; a raised exception becomes
        :class:`Failed` with its one-line reason (never raises)."""

        def call(item: T) -> R | Failed:
            try:
                return fn(item)
            except RemoteError as exc:
                return Failed(str(exc))
            except Exception as exc:  # noqa: BLE001 - one item's failure is that item's error
                return Failed(f"{type(exc).__name__}: {exc}")

        if len(items) <= 1:
            return [call(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items))) as pool:
            return list(pool.map(call, items))

    def close(self) -> None:
        self._client.close()


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (the HTTP-date form is ignored)."""
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class ResponseCache:
    """Answers of identical requests, kept in memory and, with ``path``, in an SQLite file (a repeated or resumed
    run reads them instead of paying again). Thread-safe; keys are :func:`cache_key` hashes."""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self._memory: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self.path = str(path) if path else None
        if path:
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(str(path), check_same_thread=False)
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
                )
                self._db.commit()
            except (OSError, sqlite3.Error) as exc:
                raise ValueError(f"cannot use {path} as a response cache: {exc}") from None

    def get(self, key: str) -> Any | None:
        with self._lock:
            if key in self._memory:
                return self._memory[key]
            if self._db is None:
                return None
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            value = self._memory[key] = json.loads(row[0])
            return value

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._memory[key] = value
            if self._db is not None:
                text = json.dumps(value, ensure_ascii=False)
                self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?)", (key, text))
                self._db.commit()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


def cache_key(url: str, body: Any) -> str:
    """The cache key of a request: a hash of the canonical JSON of its URL and body."""
    return hashlib.sha256(canonical_json({"url": url, "body": body}).encode()).hexdigest()


__all__ = ["Failed", "HTTPClient", "RemoteError", "ResponseCache", "api_key", "cache_key", "canonical_json"]
