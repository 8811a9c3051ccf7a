"""``rewardlab serve --ray-serve``: the same app (:func:`rewardlab.serve.app.build_app`) as a Ray Serve
deployment, ``replicas`` copies behind Ray Serve's HTTP proxy, on one machine or a Ray cluster.

Each replica builds its own app when it starts (``__serve_build_asgi_app__``: nothing is pickled but the
options), so each has its own warm pool of ``workers`` processes; Ray Serve spreads requests over the
replicas, and a replica that stops answers its requests in flight first (Ray Serve's graceful shutdown,
then the app's lifespan closes the pool). From Python::

    from ray import serve
    from rewardlab.serve.ray_serve import application

    serve.start(http_options={"host": "0.0.0.0", "port": 8000})
    serve.run(application({"source": "math", "workers": 4, "timeout": 10}, replicas=4), route_prefix="/")

A token (``token_env``) must be set where the replicas run (the environment of ``ray start`` on each node,
or inherited from this process with a local cluster): when the driver has it, a replica without it refuses
to start rather than serve without one.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

import ray
from ray import serve

from rewardlab.errors import UserError
from rewardlab.hub import check_model
from rewardlab.serve.app import build_app, build_pool
from rewardlab.serve.defaults import DEFAULT_TOKEN_ENV

APP_NAME = "rewardlab-serve"
DEFAULT_MAX_ONGOING = 256
"""Requests a replica takes at once: many, since the replica batches them (Ray Serve's default is 5)."""


@serve.ingress()
class RewardServeDeployment:
    """One replica: the app of ``build_app(**options)``, built in the replica's process."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = dict(options)

    def __serve_build_asgi_app__(self) -> Any:
        return build_app(**self.options)


def application(
    options: dict[str, Any],
    *,
    replicas: int = 1,
    num_cpus: float | None = None,
    max_ongoing_requests: int = DEFAULT_MAX_ONGOING,
    ray_actor_options: dict[str, Any] | None = None,
) -> Any:
    """The Ray Serve application (``serve.run`` it) of ``replicas`` replicas of ``build_app(**options)``.

    Args:
        options: :func:`build_app`'s keyword arguments (``source``, ``config``, ``workers``, ``timeout``...).
        replicas: Copies of the server, each with its own pool.
        num_cpus: CPUs Ray reserves per replica (default: the pool's ``workers``, so that Ray places replicas
            where their workers have room).
        max_ongoing_requests: Requests a replica takes at once.
        ray_actor_options: More options of the replicas' actors (``resources``, ``runtime_env``...).
    """
    options = dict(options)
    if os.environ.get(options.get("token_env", DEFAULT_TOKEN_ENV)):
        options["require_token"] = True  # a replica without the token must not serve without one
    actor_options = {"num_cpus": num_cpus if num_cpus is not None else options.get("workers", 2)}
    actor_options.update(ray_actor_options or {})
    deployment = serve.deployment(
        RewardServeDeployment,
        name="RewardServer",
        num_replicas=replicas,
        max_ongoing_requests=max_ongoing_requests,
        ray_actor_options=actor_options,
    )
    return deployment.bind(options)


def check_options(options: dict[str, Any]) -> None:
    """Checks the source and its settings here, before any replica starts (one line on failure): a verifier
    or ``http:`` source is built (no workers fork), a reward model only looked up.

    Raises:
        UnknownNameError, ModelNotFoundError, UserError.
    """
    if options.get("reward_model"):
        check_model(options["reward_model"], what="reward model")
        return
    try:
        _, pool = build_pool(options.get("source"), options.get("config"), options.get("workers", 2), 1.0)
    except (TypeError, ValueError) as exc:
        raise UserError(str(exc).splitlines()[0]) from exc
    pool.close()


def _wait_for_stop() -> None:
    """Returns on SIGTERM or Ctrl-C. ``ray.init`` replaced the SIGTERM handler (with one that exits at once):
    a stop must come back here, so that the application is deleted (its replicas drain) before exiting."""
    stop = threading.Event()
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set()) if in_main else None
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)


def serve_with_ray(
    options: dict[str, Any], *, replicas: int, host: str, port: int, address: str | None, pool: str
) -> int:
    """``rewardlab serve --ray-serve``: deploys, prints one line, serves until Ctrl-C or SIGTERM, then deletes
    the application (its replicas answer what is in flight first)."""
    if port == 0:
        raise UserError("--ray-serve needs a fixed --port (Ray Serve's proxy cannot pick a free one)")
    check_options(options)
    started_ray = not ray.is_initialized()
    if started_ray:
        ray.init(address=address, include_dashboard=False, configure_logging=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": host, "port": port})
        serve.run(application(options, replicas=replicas), name=APP_NAME, route_prefix="/")
        name = options.get("source") or f"reward_model:{options.get('reward_model')}"
        where = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
        print(f"rewardlab serve: {name} at {where} (Ray Serve, {replicas} replicas of {pool})", flush=True)
        _wait_for_stop()
        serve.delete(APP_NAME)
        if address is None:
            serve.shutdown()
    finally:
        if started_ray:
            ray.shutdown()
    return 0
