"""Benchmark: ``rewardlab serve`` under load, against ``rewardlab score`` on the same rows in the same run.

One server (``rewardlab serve --verifier math``, a whole process) answers closed-loop clients: each of
``C`` clients sends a request of ``--rows-per-request`` rows, waits for its answer, sends the next, until the
corpus is used up. For C = 1, 8 and 64 it prints rows/s and the p50/p99 request latency, then the same
with every 25th row hostile (a 10,000-term expression that math-verify would parse for ~50 s: it hits the
per-row timeout), ``--runs`` times. With hostile rows, the p99 of the requests that hold none must stay
within timeout + 1 s in every run.

The server runs at its defaults (spare workers on); ``--spare-workers N`` passes the server's flag (0: the
plain pool).

Two references, each measured in the same run:
- speed: ``rewardlab score`` on the same file with the same ``--workers`` and ``--timeout``, timed as a
  whole process (start-up included, as a user runs it); the server's figures exclude its start-up (it is
  started once and warm);
- answers: a plain pool (no spares) with a generous timeout, 10 x ``--timeout``, on the same rows: a row it
  pays, the server must pay, with the same reward bit for bit, and an error where it has one; a lost,
  duplicated or reordered row counts too. Its hostile rows all hold the same completion, so the reference
  scores two of them (both must time out at 10 x; scoring all of them would cost 10 x timeout of CPU each)
  and takes the timeout for the others.

    .venv/bin/python bench/serve.py                           # 2,000 math rows, 8 per request, 2 workers
    .venv/bin/python bench/serve.py --clients 8 64 --runs 5   # issue 49's operating point
    .venv/bin/python bench/serve.py --clients 64 --spare-workers 0   # the plain pool
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx

from rewardlab.scoring import Scorer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data/math/sample.jsonl"
HOSTILE = "\\boxed{" + "+".join(f"x^{{{i}}}" for i in range(10_000)) + "}"
HOSTILE_EVERY = 25


def build_rows(rows: int, hostile: bool) -> list[dict]:
    """The math sample cycled to ``rows`` rows with unique ids; with ``hostile``, every 25th completion is
    an expression that runs into the timeout."""
    base = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for i in range(rows):
        row = dict(base[i % len(base)])
        row["id"] = f"{row.get('id', i % len(base))}#{i}"
        if hostile and i % HOSTILE_EVERY == HOSTILE_EVERY - 1:
            row["completion"] = HOSTILE
        out.append(row)
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rewardlab_command() -> list[str]:
    return [sys.executable, "-m", "rewardlab.cli"]


def reference_answers(rows: list[dict], args: argparse.Namespace) -> dict:
    """The plain pool's answers (no spares, 10 x the timeout) by id; see the module docstring for the
    hostile rows."""
    clean = [row for row in rows if row["completion"] != HOSTILE]
    hostile = [row for row in rows if row["completion"] == HOSTILE]
    with Scorer("math", workers=args.workers, timeout=10 * args.timeout, spare_workers=0) as scorer:
        results = scorer.score(clean + hostile[:2])
    answers = {row["id"]: r.to_dict() for row, r in zip(clean + hostile[:2], results, strict=True)}
    if hostile:
        assert all(answers[row["id"]]["error"] == "timeout" for row in hostile[:2]), (
            "hostile rows must time out"
        )
        answers.update({row["id"]: answers[hostile[0]["id"]] for row in hostile[2:]})
    return answers


def run_score(rows: list[dict], folder: Path, tag: str, args: argparse.Namespace) -> tuple[float, dict]:
    """``rewardlab score`` as a whole process: its seconds and its output rows by id."""
    source, out = folder / f"{tag}.jsonl", folder / f"{tag}.scored.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    command = rewardlab_command() + ["score", str(source), "-o", str(out), "--verifier", "math"]
    command += ["--workers", str(args.workers), "--timeout", str(args.timeout), "--no-progress"]
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    scored = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return seconds, {row["id"]: row for row in scored}


class Server:
    """``rewardlab serve`` in a subprocess, ready when ``/health`` answers."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = rewardlab_command() + ["serve", "--verifier", "math", "--port", str(self.port)]
        command += ["--workers", str(args.workers), "--timeout", str(args.timeout)]
        if args.spare_workers is not None:
            command += ["--spare-workers", str(args.spare_workers)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"rewardlab serve exited: {self.process.stderr.read()[-2000:]}")
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    self.warm()
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("rewardlab serve did not answer /health within 120 s")

    def warm(self) -> None:
        """One request first: its lazy imports and the pool's first fork are not the first phase's latency."""
        rows = build_rows(16, hostile=False)
        httpx.post(self.url + "/score", json={"records": rows}, timeout=120).raise_for_status()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


async def load(url: str, requests: list[list[dict]], clients: int) -> tuple[float, list[tuple[float, list]]]:
    """Closed-loop clients over ``requests``: the phase's seconds and (latency, results) per request.

    The clients are aiohttp's: httpx's pool costs milliseconds per request at 64 connections (257 requests/s
    against 1,873 for aiohttp on ``/health`` here), which would measure the client, not the server."""
    queue: asyncio.Queue = asyncio.Queue()
    for index, batch in enumerate(requests):
        queue.put_nowait((index, batch))
    answers: list = [None] * len(requests)

    async def client(http: aiohttp.ClientSession, ready: asyncio.Barrier) -> None:
        async with http.get(url + "/health") as response:  # its connection is open before the clock starts
            response.raise_for_status()
        await ready.wait()
        while not queue.empty():
            index, batch = queue.get_nowait()
            start = time.perf_counter()
            async with http.post(url + "/score", json={"records": batch}) as response:
                response.raise_for_status()
                results = (await response.json())["results"]
            answers[index] = (time.perf_counter() - start, results)

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as http:
        ready = asyncio.Barrier(clients + 1)
        tasks = [asyncio.create_task(client(http, ready)) for _ in range(clients)]
        await ready.wait()
        start = time.perf_counter()
        await asyncio.gather(*tasks)
        return time.perf_counter() - start, answers


def check(requests: list[list[dict]], answers: list, expected: dict) -> int:
    """Rows whose answer differs from the reference's (reward not bit-equal, or error presence differs); a
    missing or extra row counts as a mismatch."""
    bad = 0
    for batch, (_, results) in zip(requests, answers, strict=True):
        if len(results) != len(batch):
            bad += len(batch)
            continue
        for row, result in zip(batch, results, strict=True):
            want = expected[row["id"]]
            same_reward = json.dumps(result.get("reward")) == json.dumps(want.get("reward"))
            if not same_reward or (result.get("error") is None) != (want.get("error") is None):
                bad += 1
                if bad <= 5:
                    print(
                        f"  {row['id']}: error {result.get('error')!r} here, {want.get('error')!r} in the reference"
                    )
    return bad


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def phase(server: Server, rows: list[dict], expected: dict, clients: int, args: argparse.Namespace) -> dict:
    size = args.rows_per_request
    requests = [rows[i : i + size] for i in range(0, len(rows), size)]
    seconds, answers = asyncio.run(load(server.url, requests, clients))
    hostile = [any(r["completion"] == HOSTILE for r in batch) for batch in requests]
    latencies = [latency for latency, _ in answers]
    clean = [lat for lat, bad in zip(latencies, hostile, strict=True) if not bad]
    return {
        "clients": clients,
        "rows_per_s": len(rows) / seconds,
        "p50": percentile(latencies, 0.5),
        "p99": percentile(latencies, 0.99),
        "p99_clean": percentile(clean, 0.99),
        "mismatches": check(requests, answers, expected),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--rows-per-request", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--spare-workers", type=int, default=None, help="the server's --spare-workers (default: its default)"
    )
    parser.add_argument("--runs", type=int, default=1, help="runs of each hostile phase")
    parser.add_argument("--timeout", type=float, default=1.0, help="per-row timeout (s), server and score")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 64])
    args = parser.parse_args()
    load_avg = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"operating point: {args.rows} math rows, {args.rows_per_request} rows/request, "
        f"workers={args.workers} spare_workers={args.spare_workers} timeout={args.timeout}s clients={args.clients} cpus={os.cpu_count()} "
        f"load={load_avg:.2f}; hostile: every {HOSTILE_EVERY}th row"
    )
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(args)
        try:
            for hostile in (False, True):
                failures += run_phases(server, hostile, Path(tmp), args)
        finally:
            server.stop()
    print("\nOK: every row answered once, equal to the reference" if not failures else "\nFAILED")
    sys.exit(1 if failures else 0)


def run_phases(server: Server, hostile: bool, folder: Path, args: argparse.Namespace) -> int:
    """The table of one corpus (clean or hostile): its references, then each client count (``--runs``
    times with hostile rows); returns the failures (rows that differ, p99 over its bound)."""
    rows = build_rows(args.rows, hostile)
    tag = "hostile" if hostile else "clean"
    score_s, _ = run_score(rows, folder, tag, args)
    score_rate = len(rows) / score_s
    expected = reference_answers(rows, args)
    print(f"\n{tag}: rewardlab score (whole process) {score_rate:,.0f} rows/s ({score_s:.1f} s)")
    print("clients  run   rows/s  x score   p50 (s)  p99 (s)  p99 clean (s)  differ")
    failures = 0
    for clients in args.clients:
        for run in range(args.runs if hostile else 1):
            r = phase(server, rows, expected, clients, args)
            print(
                f"{clients:>7} {run + 1:>4} {r['rows_per_s']:>8,.0f} {r['rows_per_s'] / score_rate:>8.2f} "
                f"{r['p50']:>9.3f} {r['p99']:>8.3f} {r['p99_clean']:>14.3f} {r['mismatches']:>7}"
            )
            failures += r["mismatches"]
            if hostile and r["p99_clean"] > args.timeout + 1.0:
                print(f"        p99 of clean requests over timeout + 1 s ({args.timeout + 1.0:.1f} s)")
                failures += 1
    return failures


if __name__ == "__main__":
    main()
