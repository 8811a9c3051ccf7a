"""The vllm-server backend's failure modes and config checks, without vLLM (a real vLLM server is in
tests/test_rollout_vllm.py): a server that is not there, or that answers errors, fails in one line."""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest

from rewardlab.data.tiny import load_tiny_tokenizer
from rewardlab.generation.vllm_server import ServerError, VLLMServerBackend, serve_command
from rewardlab.rl.config import ConfigError, load_config


def test_no_server_fails_in_one_line_within_the_timeout(free_port):
    t0 = time.monotonic()
    with pytest.raises(ServerError, match=f"no vLLM server at http://127.0.0.1:{free_port} after 2s"):
        VLLMServerBackend(None, load_tiny_tokenizer(), url=f"http://127.0.0.1:{free_port}", timeout=2)
    assert time.monotonic() - t0 < 10


class _Handler(http.server.BaseHTTPRequestHandler):
    """Healthy, serves one model, answers every POST with 500, except /collective_rpc with 404 (a server
    started without VLLM_SERVER_DEV_MODE)."""

    calls: list[str] = []

    def do_GET(self):  # noqa: N802
        body = {"data": [{"id": "tiny"}]} if self.path == "/v1/models" else {}
        self._send(200, body)

    def do_POST(self):  # noqa: N802
        self.calls.append(self.path)
        self._send(404 if self.path == "/collective_rpc" else 500, {"error": "boom"})

    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def failing_server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_server_errors_are_retried_then_reported(failing_server, tmp_path, monkeypatch):
    from rewardlab.data.tiny import build_tiny_model
    from rewardlab.generation import SamplingParams

    monkeypatch.setattr(time, "sleep", lambda s: None)  # the backoff between retries
    _Handler.calls = []
    backend = VLLMServerBackend(None, load_tiny_tokenizer(), url=failing_server, sync_dir=str(tmp_path / "s"))
    assert backend.served_model == "tiny"
    with pytest.raises(ServerError, match="POST .*/v1/completions failed: HTTP 500"):
        backend.generate(["1+1="], SamplingParams(n=2, max_new_tokens=4))
    assert _Handler.calls.count("/v1/completions") == 3  # retried
    with pytest.raises(ServerError, match="HTTP 404.*VLLM_SERVER_DEV_MODE=1"):
        backend.update_weights(build_tiny_model())
    assert _Handler.calls.count("/collective_rpc") == 1  # a 4xx is not retried
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["model-00000.safetensors"]
    backend.close()


def test_serve_command_sets_what_the_backend_needs():
    argv, env = serve_command("/models/policy", ["--port", "8001", "--tensor-parallel-size", "2"])
    assert env["VLLM_SERVER_DEV_MODE"] == "1"
    assert argv[argv.index("--logprobs-mode") + 1] == "processed_logprobs"
    assert argv[-4:] == ["--port", "8001", "--tensor-parallel-size", "2"]
    assert "/models/policy" in argv


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["rollout.vllm_sleep_level=2"], "vllm_sleep_level is for the colocated vllm backend"),
        (["rollout.backend=vllm", "rollout.vllm_sleep_level=3"], "rollout.vllm_sleep_level: unknown value 3"),
        (["rollout.backend=vllm-server", "rollout.vllm_server_sync=ftp"], "vllm_server_sync: unknown value"),
        (["rollout.backend=vllm-server", "rollout.vllm_server_timeout=0"], "vllm_server_timeout must be"),
        (
            ["rollout.backend=vllm", "rollout.vllm_lora=adapter"],
            "adapter needs rollout.backend: vllm and a LoRA",
        ),
        (
            [
                "rollout.backend=vllm",
                "rollout.vllm_lora=adapter",
                "model.lora.r=8",
                "rollout.vllm_sleep_level=2",
            ],
            "never re-pushes the base weights",
        ),
    ],
)
def test_memory_mode_settings_are_checked_at_load(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(preset="grpo", overrides=overrides)
