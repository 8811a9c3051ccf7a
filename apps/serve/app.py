"""``rewardlab serve``'s web app: any reward source behind HTTP, for rewardlab's ``http:`` source, OpenRLHF's
``--remote_rm_url`` and anything else that can post JSON.

Endpoints (docs/serve.md has the shapes, with examples):

- ``POST /score``: rewardlab's protocol (``{"records": [...]}`` -> ``{"results": [...]}``)
- ``POST /get_reward``: OpenRLHF's (``{"query", "prompts", "labels"}`` -> ``{"rewards", "scores", "extra_logs"}``)
- ``GET /health``: the source, the pool, whether the server takes requests (never needs the token)
- ``GET /metrics``: Prometheus text (:mod:`rewardlab.serve.metrics`)

Every request's rows go to ONE warm pool (:class:`~rewardlab.scoring.WarmPool`, ``workers`` processes, a
per-row ``timeout``) through its :class:`~rewardlab.scoring.stream.ScoringStream`, off the event loop: a row
goes to the next free worker as soon as it arrives, and a request is answered as soon as its own rows are
done, whatever other requests' rows (a hostile one running into the timeout) do. A request of the wrong shape is a 4xx with ``{"error": "<one
line>"}``; a record that cannot be scored is an error row, as in ``rewardlab score``. The rewards are
``rewardlab score``'s, bit for bit: the same engine and the same source.

:func:`build_app` builds the app for uvicorn (``rewardlab serve``), a test client or a Ray Serve replica
(:mod:`rewardlab.serve.ray_serve`); the pool's thread starts with the app and the pool closes on shutdown,
after uvicorn has answered the requests in flight.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from rewardlab.rewardmodels.sources import reward_model_source
from rewardlab.scoring.pool import WarmPool
from rewardlab.scoring.stream import Closed, QueueFull
from rewardlab.serve.defaults import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_ROWS,
    DEFAULT_SPARE_WORKERS,
    DEFAULT_TIMEOUT_S,
    DEFAULT_TOKEN_ENV,
    DEFAULT_WORKERS,
)
from rewardlab.serve.metrics import Metrics
from rewardlab.serve.protocols import (
    Refused,
    decode_json,
    get_reward_response,
    parse_get_reward_request,
    parse_score_request,
    score_response,
)
from rewardlab.types import Record, Result

ENDPOINTS = ("/score", "/get_reward", "/health", "/metrics")
LARGE_BODY_BYTES = 256 * 1024
"""Bodies larger than this are decoded off the event loop."""


class RewardServer:
    """What the app serves: the source's :class:`~rewardlab.scoring.WarmPool` (streaming), the metrics and the
    limits.

    Args:
        source: A source name as ``rewardlab score --verifier`` takes it: a verifier (``math``, ``code``...)
            or ``http:URL``. Exclusive with ``reward_model``.
        config: The source's settings (``--config KEY=VALUE``); with ``reward_model``, keyword arguments of
            ``reward_model_source`` (``device``, ``normalize``...).
        workers: Worker processes of the pool (at least 1).
        spare_workers: How many stragglers (rows that used more than 0.05 s of CPU, e.g. hostile rows on
            their way to the timeout) may hold workers beyond ``workers``, so that the other requests go on
            (``Scorer``'s ``spare_workers``; ``None``: its default, 32 per worker; 0: the plain pool).
        timeout: CPU seconds one row may use in a worker before it is an error row (``timeout``; a wall-clock
            cap of 10 x stops a row that waits). Sources that run in the server's process (``http:``,
            ``code``, reward models) keep their own timeouts; their batches run in threads, a request's
            apart from another's.
        max_body_bytes: Largest request body (413 beyond it).
        max_rows: Most rows in one request (413 beyond it).
        max_queued_rows: Most rows submitted to the pool and not yet answered before requests are refused
            with 503 (default 16 x ``max_rows``).
        token_env: Environment variable holding a bearer token, read now; when it is set, every endpoint but
            ``/health`` needs ``Authorization: Bearer <token>`` (401 otherwise).
        require_token: Refuse to build (ValueError) when ``token_env`` is not set (a Ray Serve replica whose
            driver had a token must not serve without one).
        row_verifiers: Let a record's ``verifier`` field choose another verifier (off: such a row is an error
            row, so that a client cannot make the server run what it was not started for).
        reward_model: A reward model folder or hub name (an ORM, or a PRM folder) instead of ``source``.
    """

    def __init__(
        self,
        source: str | None = None,
        *,
        config: dict[str, Any] | None = None,
        workers: int = DEFAULT_WORKERS,
        spare_workers: int | None = DEFAULT_SPARE_WORKERS,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_rows: int = DEFAULT_MAX_ROWS,
        max_queued_rows: int | None = None,
        token_env: str = DEFAULT_TOKEN_ENV,
        require_token: bool = False,
        row_verifiers: bool = False,
        reward_model: str | None = None,
    ) -> None:
        if max_body_bytes < 1 or max_rows < 1:
            raise ValueError("max_body_bytes and max_rows must be >= 1")
        self.token = _token(token_env, require_token)
        self.metrics = Metrics(
            gauges={"pool_workers": lambda: self.pool.pool_size, "queued_rows": lambda: self.pool.queued_rows}
        )
        self.name, self.pool = build_pool(
            source,
            config,
            workers,
            timeout,
            reward_model,
            spare_workers,
            max_queued_rows=max_queued_rows or 16 * max_rows,
            on_chunk=self.metrics.chunk,
        )
        self.workers = workers
        self.timeout = float(timeout)
        self.max_body_bytes = max_body_bytes
        self.max_rows = max_rows
        # A reward model scores every row (as `rewardlab score --reward-model`): a row's verifier is not read.
        self.verifier_field = "ignore" if reward_model else "allow" if row_verifiers else "refuse"

    async def score(self, items: list[Record | Result]) -> list[Result]:
        """One result per item: records scored by the pool (off the event loop), results kept as they are."""
        records = [item for item in items if isinstance(item, Record)]
        try:
            future = self.pool.submit(records)
        except (QueueFull, Closed) as exc:
            raise Refused(503, str(exc), {"Retry-After": "1"}) from None
        scored = iter(await asyncio.wrap_future(future))
        return [next(scored) if isinstance(item, Record) else item for item in items]

    def health(self) -> dict[str, Any]:
        return {
            "status": "closing" if self.closing else "ok" if self.pool.running else "starting",
            "ready": self.pool.running,
            "source": self.name,
            "workers": self.workers,
            "timeout": self.timeout,
            "max_rows": self.max_rows,
            "queued_rows": self.pool.queued_rows,
            "pid": os.getpid(),
        }

    @property
    def closing(self) -> bool:
        return self.pool.closed

    def close(self) -> None:
        self.pool.close()


def build_pool(
    source: str | None,
    config: dict[str, Any] | None,
    workers: int,
    timeout: float,
    reward_model: str | None = None,
    spare_workers: int | None = None,
    **stream: Any,
) -> tuple[str, WarmPool]:
    """The source's name and its warm, streaming :class:`WarmPool`, built now: a source named as ``rewardlab
    score --verifier`` takes it (a verifier, ``http:URL``; ``config`` its settings), or a reward model folder
    (``config``: keyword arguments of ``reward_model_source``, as ``rewardlab score --reward-model``).
    ``stream``: the stream's ``max_queued_rows`` and ``on_chunk``.

    Raises:
        UnknownNameError: an unknown verifier. ValueError, TypeError: bad settings. ModelNotFoundError.
    """
    if (source is None) == (reward_model is None):
        raise ValueError("give a source name or a reward model (one of them)")
    if workers < 1:
        raise ValueError("workers must be >= 1 (a server needs worker processes for its per-row timeout)")
    if reward_model is not None:
        name = f"reward_model:{reward_model}"
        model = functools.partial(reward_model_source, reward_model, **(config or {}))
        pool = WarmPool(name, workers=workers, timeout=timeout, build=model, stream=True, **stream)
    else:
        # run=None: names as `rewardlab score` takes them (RL-only kinds such as rm:, py: are unknown here).
        name = source  # type: ignore[assignment]
        pool = WarmPool(
            name, config, workers=workers, timeout=timeout, spare_workers=spare_workers, stream=True, **stream
        )
    pool.build()
    return name, pool


def _token(token_env: str, require: bool) -> str | None:
    token = os.environ.get(token_env) or None
    if require and token is None:
        raise ValueError(f"a token is required but ${token_env} is not set in this process")
    return token


# ----------------------------------------------------------------------------------------------------------
# The app
# ----------------------------------------------------------------------------------------------------------
def build_app(source: str | None = None, **options: Any) -> FastAPI:
    """The FastAPI app serving ``source`` (see the module docstring); ``options`` are
    :class:`RewardServer`'s.

    Raises:
        UnknownNameError, ValueError, TypeError, ModelNotFoundError: a bad source or settings, before anything
        starts.
    """
    return app_of(RewardServer(source, **options))


def app_of(server: RewardServer) -> FastAPI:
    """The app of a :class:`RewardServer`: routes, error answers, metrics and the pool's lifespan."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        server.pool.start()
        try:
            yield
        finally:
            # uvicorn has answered the requests in flight by now: the pool drains what is queued and stops.
            await asyncio.to_thread(server.close)

    app = FastAPI(title="rewardlab serve", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.server = server
    _add_error_answers(app)
    _add_metrics(app, server.metrics)
    _add_routes(app, server)
    return app


def _add_routes(app: FastAPI, server: RewardServer) -> None:
    authorised = Depends(_auth(server.token))

    @app.post("/score", dependencies=[authorised])
    async def score(request: Request) -> JSONResponse:
        items = await _parsed(
            await read_body(request, server.max_body_bytes),
            parse_score_request,
            max_rows=server.max_rows,
            source_name=server.name,
            verifier_field=server.verifier_field,
        )
        results = await server.score(items)
        server.metrics.scored("/score", results)
        return JSONResponse(score_response(results))

    @app.post("/get_reward", dependencies=[authorised])
    async def get_reward(request: Request) -> JSONResponse:
        body = await read_body(request, server.max_body_bytes)
        records = await _parsed(body, parse_get_reward_request, max_rows=server.max_rows)
        results = await server.score(list(records))
        server.metrics.scored("/get_reward", results)
        return JSONResponse(get_reward_response(results))

    @app.get("/health")
    async def health() -> JSONResponse:
        body = server.health()
        return JSONResponse(body, status_code=503 if server.closing else 200)

    @app.get("/metrics", dependencies=[authorised])
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(server.metrics.render(), media_type="text/plain; version=0.0.4")


def _auth(token: str | None) -> Callable[[Request], None]:
    """The check of ``Authorization: Bearer <token>`` (none when no token is set)."""
    expected = f"Bearer {token}".encode() if token else None

    def check(request: Request) -> None:
        if expected is None:
            return
        given = request.headers.get("authorization", "").encode()
        # compare_digest: the time taken does not tell how much of a guess was right.
        if not hmac.compare_digest(given, expected):
            raise Refused(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})

    return check


async def _parsed(body: bytes, parse: Callable[..., Any], **options: Any) -> Any:
    """``parse(decoded body, **options)``; a large body is decoded in a thread, so that the event loop goes on
    answering other requests meanwhile (a 64 MiB body takes a while)."""

    def run() -> Any:
        return parse(decode_json(body), **options)

    return await asyncio.to_thread(run) if len(body) > LARGE_BODY_BYTES else run()


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) as soon as it is known to exceed ``limit`` bytes: by its
    ``Content-Length``, or while it streams in (a chunked body has none)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise Refused(413, f"the body has {int(length)} bytes; this server takes at most {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Refused(413, f"the body exceeds {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _add_error_answers(app: FastAPI) -> None:
    """Every refusal as ``{"error": "<one line>"}`` with its status, FastAPI's own (404, 405) included."""

    @app.exception_handler(Refused)
    async def refused(request: Request, exc: Refused) -> JSONResponse:
        return JSONResponse({"error": exc.message}, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:  # a bug: still one line of JSON
        line = f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        return JSONResponse({"error": f"internal error: {line}"}, status_code=500)


def _add_metrics(app: FastAPI, metrics: Metrics) -> None:
    @app.middleware("http")
    async def count(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        path = request.url.path
        endpoint = path if path in ENDPOINTS else "other"  # a label per unknown path would grow unbounded
        metrics.started()
        start = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            metrics.answered(endpoint, status, time.perf_counter() - start)
