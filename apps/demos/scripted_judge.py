"""A scripted judge behind a real OpenAI-compatible chat-completions server, for the rubric demo and its
tests: the ``rubric`` reward source talks to it exactly as to ``vllm serve`` or a hosted API, but every
verdict comes from a rule, so runs are fast, free and reproducible. Standard library only.

Endpoints (``http://HOST:PORT/v1``):

* ``GET /v1/models``: one model, :data:`MODEL` (any model name is accepted in requests, and tallied);
* ``POST /v1/chat/completions``: the last user message is read as the rubric source's judge prompt, one of

  - a criterion: ``[Question]\\n{prompt}\\n\\n[Response]\\n{response}\\n\\n[Criterion]\\n{criterion}\\n\\n...``:
    the answer ends with ``Verdict: yes`` or ``Verdict: no`` (for a pitfall's prompt, yes = the response
    does what the criterion describes, the mistake);
  - a whole rubric (RaR-Implicit): ``...[Rubric]\\n1. (essential, weight 5) ...`` lines: the answer ends with
    ``Score: N/10``, N = 1 + 9 x the weighted share met (rounded), the explicit formula's value;

  ``n`` identical choices, token ``logprobs`` (all 0: the judge is certain) when asked, ``max_tokens``
  honoured (a longer answer is cut, ``finish_reason: length``), and ``usage``: tokens counted as one per 4
  characters (OpenAI's rule of thumb for English), rounded up. A prompt without these sections is a 400;
* ``GET /stats``: requests, tokens and verdicts so far, in all and by model (not OpenAI's: for the demo).

The rules read only the criterion's text and the response (:func:`judge_criterion`); each form names what it
checks, the expected value included:

* ``States that N is odd.`` (or ``even``): the response says that parity and never the other;
* ``Claims that N is even.`` (or ``odd``): the response says that parity (a pitfall's usual wording);
* ``Gives the number after N (M).``: a number follows ``next`` or ``after``, and every such number is M;
  likewise ``Gives the number before N (M).`` (``prev``, ``previous``, ``before``), ``Gives N rounded to
  the nearest ten (M).`` (``round``, ``rounded``) and ``Gives the digit sum of N (M).`` (``sum``).

Any other criterion is not met (``Verdict: no``, saying that no rule reads it).

``JudgeServer`` serves in a thread (``with JudgeServer() as judge: judge.url``); ``python -m
rewardlab.demos.scripted_judge --port 8000`` serves in the foreground; :func:`fetch_stats` reads ``/stats``
from another process.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import math
import re
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from typing import Any

MODEL = "scripted-judge"
"""The model ``GET /v1/models`` lists."""
CHARS_PER_TOKEN = 4
"""Usage counts one token per this many characters (rounded up)."""

_PARITIES = ("odd", "even")
_LABELS = {
    "number after": ("next", "after"),
    "number before": ("prev", "previous", "before"),
    "digit sum of": ("sum",),
}
_STATES = re.compile(r"^States that (?P<n>-?\d+) is (?P<parity>odd|even)\.?$", re.I)
_CLAIMS = re.compile(r"^Claims that (?P<n>-?\d+) is (?P<parity>odd|even)\.?$", re.I)
_GIVES = re.compile(
    r"^Gives the (?P<what>number after|number before|digit sum of) (?P<n>-?\d+) \((?P<value>-?\d+)\)\.?$",
    re.I,
)
_ROUNDS = re.compile(r"^Gives (?P<n>-?\d+) rounded to the nearest ten \((?P<value>-?\d+)\)\.?$", re.I)
_RUBRIC_LINE = re.compile(r"^\s*\d+\.\s*\((?P<tags>[^)]*)\)\s*(?P<text>.+?)\s*$")


# ----------------------------------------------------------------------------------------------------------
# the rules
# ----------------------------------------------------------------------------------------------------------
def _says(word: str, response: str) -> bool:
    return re.search(rf"\b{word}\b", response, re.I) is not None


def _labelled_numbers(labels: tuple[str, ...], response: str) -> list[int]:
    """The numbers the response gives after one of ``labels`` (``next 474``, ``after: 474``, ``sum = 14``)."""
    pattern = rf"\b(?:{'|'.join(labels)})\b\s*(?:is|=|:)?\s*(-?\d+)"
    return [int(m) for m in re.findall(pattern, response, re.I)]


def judge_criterion(criterion: str, response: str) -> tuple[bool, str]:
    """Whether ``response`` does what ``criterion`` says, and a one-sentence reason (no verdict in it).

    A criterion no rule reads is not met."""
    text = criterion.strip()
    if match := _STATES.match(text):
        want = match["parity"].lower()
        other = next(p for p in _PARITIES if p != want)
        if not _says(want, response):
            return False, f"The response never says that {match['n']} is {want}."
        if _says(other, response):
            return False, f"The response also calls {match['n']} {other}, so it does not commit to {want}."
        return True, f"The response says that {match['n']} is {want}."
    if match := _CLAIMS.match(text):
        want = match["parity"].lower()
        if _says(want, response):
            return True, f"The response calls {match['n']} {want}."
        return False, f"The response never calls {match['n']} {want}."
    if match := _GIVES.match(text):
        what = match["what"].lower()
        return _gives(_LABELS[what], what.removesuffix(" of"), int(match["value"]), response)
    if match := _ROUNDS.match(text):
        return _gives(("round", "rounded"), "rounded number", int(match["value"]), response)
    return False, "The scripted judge has no rule for this criterion."


def _gives(labels: tuple[str, ...], what: str, value: int, response: str) -> tuple[bool, str]:
    """Whether ``response`` gives ``value`` after one of ``labels`` and no other number there."""
    given = _labelled_numbers(labels, response)
    if not given:
        return False, f"The response gives no {what}."
    if any(g != value for g in given):
        return False, f"The response gives {', '.join(map(str, given))} where {value} is expected."
    return True, f"The response gives {value}."


@dataclass(frozen=True)
class RubricLine:
    """One criterion of an implicit prompt's rubric: its text, weight and whether it is a pitfall."""

    text: str
    weight: float
    pitfall: bool


def parse_rubric_lines(rubric: str) -> list[RubricLine]:
    """The criteria of an implicit prompt's ``[Rubric]`` (``1. (essential, weight 5) States ...``); a line
    that is no criterion is skipped."""
    lines = []
    for line in rubric.splitlines():
        match = _RUBRIC_LINE.match(line)
        if not match:
            continue
        tags = [t.strip().lower() for t in match["tags"].split(",")]
        weight = next((float(t.split()[1]) for t in tags if re.fullmatch(r"weight -?[\d.]+", t)), 1.0)
        pitfall = "pitfall" in tags or "a mistake to avoid" in tags or weight < 0
        lines.append(RubricLine(match["text"], weight, pitfall))
    return lines


def rubric_score(rubric: str, response: str) -> tuple[int, str]:
    """RaR-Implicit's 1-10 score of ``response`` against a whole rubric: the explicit formula's value (the
    weighted share met over the positive weights, a negative-weight pitfall made subtracting, one with a
    positive weight earned when avoided, clipped to [0, 1]) mapped onto 1-10."""
    lines = parse_rubric_lines(rubric)
    total = sum(c.weight for c in lines if c.weight > 0)
    if not lines or total <= 0:
        return 1, "The rubric has no criterion with a positive weight."
    earned = 0.0
    for c in lines:
        met, _ = judge_criterion(c.text, response)
        if c.pitfall and c.weight > 0:
            met = not met  # a positive pitfall weight is earned by avoiding the mistake
        earned += c.weight * met
    share = min(1.0, max(0.0, earned / total))
    return 1 + round(9 * share), f"The response earns {share:.0%} of the rubric's weight."


# ----------------------------------------------------------------------------------------------------------
# the prompt and the answer
# ----------------------------------------------------------------------------------------------------------
class BadRequest(ValueError):
    """A request the judge cannot read (answered with HTTP 400 and the message)."""


def sections(message: str) -> dict[str, str]:
    """``question``, ``response`` and ``criterion`` (or ``rubric``) of a judge prompt: the question up to
    the first ``[Response]``, the criterion (rubric) from the last ``[Criterion]`` (``[Rubric]``) up to the
    blank line before the instruction, the response between (so a response quoting a marker stays whole).

    Raises:
        BadRequest: a section is missing.
    """
    head = "[Question]\n"
    start = message.find(head)
    cut = message.find("\n\n[Response]\n", start + len(head))
    tail_name, tail_at = None, -1
    for name, marker in (("criterion", "\n\n[Criterion]\n"), ("rubric", "\n\n[Rubric]\n")):
        at = message.rfind(marker)
        if at > tail_at:
            tail_name, tail_at = name, at
    if start < 0 or cut < 0 or tail_at <= cut or tail_name is None:
        raise BadRequest(
            "the scripted judge reads '[Question]', '[Response]' and '[Criterion]' (or '[Rubric]') sections"
        )
    body_at = tail_at + len(f"\n\n[{tail_name.title()}]\n")
    end = message.find("\n\n", body_at)
    return {
        "question": message[start + len(head) : cut],
        "response": message[cut + len("\n\n[Response]\n") : tail_at],
        tail_name: message[body_at : len(message) if end < 0 else end],
        "instruction": "" if end < 0 else message[end + 2 :],
    }


def judgment(message: str) -> tuple[str, str]:
    """The judge's answer text to one prompt, and its verdict (``yes``, ``no`` or ``N/10``)."""
    parts = sections(message)
    if "rubric" in parts:
        score, reason = rubric_score(parts["rubric"], parts["response"])
        return f"{reason}\nScore: {score}/10", f"{score}/10"
    met, reason = judge_criterion(parts["criterion"], parts["response"])
    verdict = "yes" if met else "no"
    return f"{reason}\nVerdict: {verdict}", verdict


def count_tokens(text: str) -> int:
    """Tokens billed for ``text``: one per :data:`CHARS_PER_TOKEN` characters, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _user_message(body: Any) -> str:
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users or not isinstance(users[-1].get("content"), str):
        raise BadRequest("no user message with text content")
    return users[-1]["content"]


def completion(body: Any) -> tuple[dict[str, Any], str]:
    """The ``chat.completion`` object answering a request body, and its verdict.

    Raises:
        BadRequest: a body the judge cannot read.
    """
    message = _user_message(body)
    n = body.get("n", 1)
    max_tokens = body.get("max_tokens")
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 128:
        raise BadRequest("'n' must be an integer from 1 to 128")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise BadRequest("'max_tokens' must be a positive integer")
    text, verdict = judgment(message)
    finish = "stop"
    if max_tokens is not None and count_tokens(text) > max_tokens:
        text, finish = text[: max_tokens * CHARS_PER_TOKEN], "length"
    choice: dict[str, Any] = {"message": {"role": "assistant", "content": text}, "finish_reason": finish}
    if body.get("logprobs"):
        # whitespace-led pieces, so the verdict word is a token of its own; the judge is certain
        tokens = re.findall(r"\s*\S+", text)
        choice["logprobs"] = {"content": [{"token": t, "logprob": 0.0, "bytes": None} for t in tokens]}
    prompt_tokens = sum(
        count_tokens(m["content"]) for m in body["messages"] if isinstance(m.get("content"), str)
    )
    answer = {
        "id": f"chatcmpl-scripted-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or MODEL),
        "choices": [{"index": i, **choice} for i in range(n)],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": n * count_tokens(text),
            "total_tokens": prompt_tokens + n * count_tokens(text),
        },
    }
    return answer, verdict


# ----------------------------------------------------------------------------------------------------------
# the server
# ----------------------------------------------------------------------------------------------------------
class Tally:
    """What the server has answered: requests, tokens and verdicts, in all and by model (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total: Counter[str] = Counter()
        self._by_model: dict[str, Counter[str]] = {}

    def add(self, model: str, answer: dict[str, Any] | None, verdict: str | None) -> None:
        counts: Counter[str] = Counter()
        if answer is None:
            counts["rejected"] = 1
        else:
            counts["requests"] = 1
            counts["prompt_tokens"] = answer["usage"]["prompt_tokens"]
            counts["completion_tokens"] = answer["usage"]["completion_tokens"]
            counts[f"verdict_{verdict}" if verdict in ("yes", "no") else "scores"] = 1
        with self._lock:
            self._total.update(counts)
            self._by_model.setdefault(model, Counter()).update(counts)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"total": dict(self._total), "by_model": {m: dict(c) for m, c in self._by_model.items()}}


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # several seeds' clients connect at once; the default 5 would refuse some
    tally: Tally


class JudgeHandler(http.server.BaseHTTPRequestHandler):
    """The endpoints of the module docstring."""

    protocol_version = "HTTP/1.1"  # keep-alive: a client's connection serves many requests
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        path = self.path.split("?")[0].rstrip("/")
        if path == "/v1/models":
            data = [{"id": MODEL, "object": "model", "created": 0, "owned_by": "rewardlab"}]
            self._send(200, {"object": "list", "data": data})
        elif path == "/stats":
            self._send(200, self.server.tally.snapshot())
        elif path == "/health":
            self._send(200, {"status": "ok"})
        else:
            self._error(404, f"no such endpoint: GET {path}")

    def do_POST(self) -> None:  # noqa: N802 - the standard library's name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.split("?")[0].rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no such endpoint: POST {self.path}")
            return
        model = MODEL
        try:
            body = json.loads(raw)
            if isinstance(body, dict) and isinstance(body.get("model"), str):
                model = body["model"]
            answer, verdict = completion(body)
        except (BadRequest, json.JSONDecodeError, UnicodeDecodeError) as exc:
            self.server.tally.add(model, None, None)
            self._error(400, str(exc))
            return
        self.server.tally.add(model, answer, verdict)
        self._send(200, answer)

    def _error(self, code: int, message: str) -> None:
        kind = "invalid_request_error" if code == 400 else "not_found_error"
        self._send(code, {"error": {"message": message, "type": kind, "code": code}})

    def _send(self, code: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up
            self.wfile.write(data)

    def log_message(self, *args: Any) -> None:  # thousands of requests a minute: no access log
        pass


class JudgeServer:
    """The scripted judge on ``host:port`` (0: a free port), served by a thread once started.

    ``url`` is the OpenAI API root to give a client (``http://127.0.0.1:PORT/v1``); ``stats()`` what it has
    answered. A context manager: started on entry, stopped on exit."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = _Server((host, port), JudgeHandler)
        self._server.tally = Tally()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> JudgeServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="scripted-judge", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def serve_forever(self) -> None:
        """Serves in the calling thread until interrupted (Ctrl-C), then closes the socket."""
        try:
            self._server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            self._server.server_close()

    def stats(self) -> dict[str, Any]:
        """``{"total": {...}, "by_model": {MODEL: {...}}}``: ``requests``, ``prompt_tokens``,
        ``completion_tokens``, ``verdict_yes``, ``verdict_no``, ``scores`` (implicit prompts), ``rejected``."""
        return self._server.tally.snapshot()

    def __enter__(self) -> JudgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def fetch_stats(url: str, timeout: float = 10.0) -> dict[str, Any]:
    """A judge server's ``/stats`` from its API root ``url`` (``http://HOST:PORT/v1``)."""
    root = url.rstrip("/").removesuffix("/v1")
    with urllib.request.urlopen(f"{root}/stats", timeout=timeout) as answer:
        return json.loads(answer.read())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rewardlab.demos.scripted_judge", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0: a free port")
    args = parser.parse_args(argv)
    judge = JudgeServer(args.host, args.port)
    print(f"scripted judge serving on {judge.url}", flush=True)
    judge.serve_forever()


if __name__ == "__main__":
    main()
