"""`rewardlab serve`: any reward source behind an HTTP server (rewardlab's /score, OpenRLHF's /get_reward,
/health, /metrics), on uvicorn or as a Ray Serve deployment (docs/serve.md)."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import threading
import time
from typing import Any

from rewardlab.cli import Terminated
from rewardlab.cli.args import check_pool_limits
from rewardlab.cli.listen import listening_socket
from rewardlab.cli.score import key_value, parse_value
from rewardlab.errors import UserError
from rewardlab.extras import require
from rewardlab.serve.defaults import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_ROWS,
    DEFAULT_SPARE_WORKERS,
    DEFAULT_TIMEOUT_S,
    DEFAULT_TOKEN_ENV,
    DEFAULT_WORKERS,
)

ROUTES = "POST /score, POST /get_reward, GET /health, GET /metrics"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="Serve a reward source over HTTP (rewardlab's and OpenRLHF's protocols).",
        description=(
            "Serve a verifier, a reward server (http:URL) or a reward model over HTTP: POST /score takes "
            "rewardlab's protocol (what an http:URL source sends), POST /get_reward OpenRLHF's "
            "(--remote_rm_url http://HOST:PORT/get_reward); GET /health and GET /metrics (Prometheus). "
            "Concurrent requests share one warm worker pool with a per-row timeout. SIGTERM answers the "
            "requests in flight, then exits."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--verifier", default=None, help="the source: a verifier name or http:URL")
    parser.add_argument(
        "--reward-model",
        default=None,
        metavar="PATH",
        help="serve a reward model (ORM, or PRM folder) instead",
    )
    parser.add_argument(
        "--config",
        action="append",
        type=key_value,
        default=[],
        metavar="KEY=VALUE",
        help="setting of the source (of the reward model with --reward-model), VALUE parsed as JSON when it can be",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=int, default=8000, help="port (0: a free one, printed)")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help="worker processes of the pool")
    parser.add_argument(
        "--spare-workers",
        type=int,
        default=DEFAULT_SPARE_WORKERS,
        help="stragglers (rows past 0.05 s of CPU, e.g. hostile ones) that may hold workers beyond --workers, "
        "so that a flood of them does not hold other requests (default: 32 per worker; 0: the plain pool; "
        "docs/serve.md)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help="CPU seconds a row may use in its worker before it fails with 'timeout' (a wall-clock cap of 10x "
        "stops a row that waits without using CPU)",
    )
    parser.add_argument(
        "--max-rows", type=int, default=DEFAULT_MAX_ROWS, help="most rows in one request (413 beyond)"
    )
    parser.add_argument(
        "--max-body-mb",
        type=float,
        default=DEFAULT_MAX_BODY_BYTES / 2**20,
        help="largest request body in MiB (413 beyond)",
    )
    parser.add_argument(
        "--token-env",
        default=DEFAULT_TOKEN_ENV,
        metavar="VAR",
        help="environment variable holding a bearer token; when set, every endpoint but /health needs it",
    )
    parser.add_argument(
        "--row-verifiers",
        action="store_true",
        help="let a record's 'verifier' field choose another verifier (default: such a row is an error row)",
    )
    parser.add_argument("--ray-serve", action="store_true", help="run as a Ray Serve deployment")
    parser.add_argument("--replicas", type=int, default=1, help="with --ray-serve: replicas of the server")
    parser.add_argument(
        "--address",
        default=None,
        metavar="HOST:PORT",
        help="with --ray-serve: the Ray cluster to join (started with `ray start --head`); default a local one",
    )
    parser.set_defaults(func=run)


def server_options(args: argparse.Namespace) -> dict[str, Any]:
    """``build_app``'s keyword arguments from the flags, checked (UserError in one line)."""
    if (args.verifier is None) == (args.reward_model is None):
        raise UserError("give --verifier NAME or --reward-model PATH (one of them)")
    if args.workers < 1:
        raise UserError("--workers must be >= 1 (the per-row timeout needs worker processes)")
    check_pool_limits(args.timeout, args.spare_workers)
    if args.max_rows < 1 or not math.isfinite(args.max_body_mb) or args.max_body_mb <= 0:
        raise UserError("--max-rows and --max-body-mb must be > 0")
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be 0-65535, got {args.port}")
    if (args.replicas != 1 or args.address) and not args.ray_serve:
        raise UserError("--replicas and --address need --ray-serve")
    if args.replicas < 1:
        raise UserError("--replicas must be >= 1")
    return {
        "source": args.verifier,
        "reward_model": args.reward_model,
        "config": {key: parse_value(value) for key, value in args.config} or None,
        "workers": args.workers,
        "spare_workers": args.spare_workers,
        "timeout": args.timeout,
        "max_rows": args.max_rows,
        "max_body_bytes": max(1, int(args.max_body_mb * 1024 * 1024)),
        "token_env": args.token_env,
        "row_verifiers": args.row_verifiers,
    }


def run(args: argparse.Namespace) -> int:
    options = server_options(args)
    if args.ray_serve:
        return _run_ray_serve(args, options)
    import uvicorn

    # lazy: pulls in fastapi (and builds the source: a reward model pulls in torch)
    from rewardlab.serve.app import build_app

    try:
        app = build_app(**options)
    except (TypeError, ValueError) as exc:  # bad settings of the source (an unknown name is UnknownNameError)
        raise UserError(str(exc).splitlines()[0]) from exc
    sock, url = listening_socket(args.host, args.port)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    _announce(server, f"rewardlab serve: {app.state.server.name} at {url} ({ROUTES}; {_pool(args)})")
    with contextlib.suppress(Terminated):
        # On SIGTERM uvicorn answers the requests in flight and closes the pool (the app's lifespan), then
        # raises the signal it caught again: a server stopped so has done its job (exit 0).
        server.run(sockets=[sock])
    return 0


def _announce(server: Any, line: str) -> None:
    """Prints ``line`` once ``server`` takes requests (after the app's startup: the pool's thread runs)."""

    def wait() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.02)
        if server.started:
            print(line, flush=True)
            print("  (Ctrl-C or SIGTERM stops, after answering the requests in flight)", file=sys.stderr)

    threading.Thread(target=wait, name="rewardlab-serve-announce", daemon=True).start()


def _pool(args: argparse.Namespace) -> str:
    auth = "; bearer token required" if os.environ.get(args.token_env) else ""
    return f"{args.workers} worker{'s' if args.workers != 1 else ''}, timeout {args.timeout:g}s{auth}"


def _run_ray_serve(args: argparse.Namespace, options: dict[str, Any]) -> int:
    require("ray.serve", extra="ray", what="rewardlab serve --ray-serve")
    # lazy: pulls in ray[serve] and fastapi
    from rewardlab.serve.ray_serve import serve_with_ray

    return serve_with_ray(
        options,
        replicas=args.replicas,
        host=args.host,
        port=args.port,
        address=args.address,
        pool=_pool(args),
    )
