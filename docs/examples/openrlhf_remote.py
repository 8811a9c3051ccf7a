"""rewardlab's math verifier as OpenRLHF's remote reward model, in one script.

It starts ``rewardlab serve``'s app (:func:`rewardlab.serve.app.build_app`) on a free local port, then posts
what OpenRLHF's trainer posts for ``--remote_rm_url`` (``SingleTurnAgentExecutor._fetch_rewards_via_http``
in ``openrlhf/utils/agent.py``, OpenRLHF 0.11.2): ``{"query": [prompt + response], "prompts": [prompt],
"labels": [label]}`` to ``/get_reward``, and reads ``rewards`` (and ``scores``, ``extra_logs``) back.

With a real run, start the server once (``rewardlab serve --verifier math --host 0.0.0.0 --port 8000``) and
give the trainer its URL::

    python -m openrlhf.cli.train_ppo_ray ... --remote_rm_url http://RM_HOST:8000/get_reward \\
        --label_key answer

Run it: ``python docs/examples/openrlhf_remote.py`` (prints one line per query).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn

from rewardlab.serve.app import build_app

PROMPT = (
    "<|im_start|>user\nWhat is 6 times 7? Put the answer in \\boxed{}.<|im_end|>\n<|im_start|>assistant\n"
)
RESPONSES = ["6 times 7 is \\boxed{42}.", "It is \\boxed{43}.", "I am not sure."]


@contextmanager
def serving(app) -> Iterator[str]:
    """``app`` on uvicorn in a thread, on a free port of 127.0.0.1; yields the base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True  # what SIGTERM does: requests in flight are answered, the pool closes
        thread.join()
        sock.close()


def openrlhf_request(url: str, queries: list[str], prompts: list[str], labels: list[str]) -> dict:
    """One request as OpenRLHF's trainer makes it (its client uses aiohttp and retries; the body is this)."""
    payload = {"query": queries, "prompts": prompts, "labels": labels}
    response = httpx.post(url, json=payload, timeout=180)
    response.raise_for_status()
    return response.json()


def main() -> list[float]:
    """Serves the math verifier, scores three responses to one prompt the OpenRLHF way; their rewards."""
    app = build_app("math", workers=1, timeout=10)
    with serving(app) as base:
        queries = [PROMPT + response for response in RESPONSES]
        answer = openrlhf_request(f"{base}/get_reward", queries, [PROMPT] * 3, ["42"] * 3)
    for response, reward in zip(RESPONSES, answer["rewards"], strict=True):
        print(f"{reward:4.1f}  {response}")
    return answer["rewards"]


if __name__ == "__main__":
    main()
