"""Latencies that the default test suite used to bound with a stopwatch (issue 47): each is measured here,
with the reference it should be compared to measured in the same run, and printed as a ratio.

- ``stream idle``: a one-row request to a ``ScoringStream`` (``--workers`` forked workers, a verifier that
  returns at once) submitted after ``--idle`` seconds of idle, against the same request submitted while the
  stream has just answered another (busy). Target: idle/busy <= 3 (a stream thread that polled instead of
  waking on submit would add up to its poll interval).
- ``stream behind hostile``: the same request while another request's row sleeps (holding one worker until
  its timeout), against the busy reference. Target: <= 3 (a barrier would add the hostile row's timeout).
- ``tool timeout``: ``FunctionTool.run`` on ``--calls`` stuck calls against the per-call timeout
  ``--tool-timeout``. Target: <= 1.5 (the calls share one deadline; one after the other would be ``--calls``).
- ``math extract``: the math verifier's ``extract`` on tests/test_math_verifier.py's adversarial floods at
  their length and at 4x, the time at 4x over the time at 1x (best of ``--repeat``). Target: <= 6 (linear
  is 4, quadratic 16).

Each figure is the median of ``--repeat`` runs. The operating point (CPUs, load average, workers, idle) is
printed first.

    .venv/bin/python bench/latency.py [--workers 2] [--repeat 7] [--idle 1.0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from typing import ClassVar

from rewardlab.envs.base import EpisodeState
from rewardlab.envs.tools import FunctionTool
from rewardlab.scoring import Scorer, ScoringStream
from rewardlab.types import Record, Result
from rewardlab.verifiers.base import Verifier


class SleepyVerifier(Verifier):
    """Sleeps ``completion`` seconds, then rewards 1."""

    name: ClassVar[str] = "bench-sleepy"

    def verify(self, record: Record) -> Result:
        time.sleep(float(record.completion))
        return Result(reward=1.0)


def _rows(n: int, seconds: float = 0.0) -> list[Record]:
    return [Record(completion=str(seconds)) for _ in range(n)]


def _latency(stream: ScoringStream) -> float:
    start = time.perf_counter()
    stream.submit(_rows(1)).result(60)
    return time.perf_counter() - start


def stream_figures(workers: int, repeat: int, idle: float) -> dict[str, float]:
    busy, after_idle, behind = [], [], []
    for _ in range(repeat):
        with ScoringStream(Scorer(SleepyVerifier(), workers=workers, timeout=30)) as stream:
            stream.submit(_rows(2 * workers)).result(60)  # warm: the workers exist
            stream.submit(_rows(1)).result(60)
            busy.append(_latency(stream))
            time.sleep(idle)
            after_idle.append(_latency(stream))
            hostile = stream.submit(_rows(1, 60))
            time.sleep(0.1)
            behind.append(_latency(stream))
            stream.abort()
            hostile.result(60)
    return {
        "busy": statistics.median(busy),
        "idle": statistics.median(after_idle),
        "behind hostile": statistics.median(behind),
    }


def tool_figure(calls: int, timeout: float, repeat: int) -> float:
    release = threading.Event()
    tool = FunctionTool(lambda x: release.wait(120), name="stuck")
    runs = []
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            out = tool.run([(EpisodeState(Record()), {"x": i}) for i in range(calls)], timeout)
            runs.append(time.perf_counter() - start)
            assert [r.error for r in out] == ["timeout"] * calls
    finally:
        release.set()
    return statistics.median(runs)


FLOODS = {  # name: (unit, repeats at 1x): tests/test_math_verifier.py's floods
    "\\boxed{ x5000": ("\\boxed{", 5000),
    "{ x100000 then \\boxed{3}": ("{", 100_000),
    "1,2, x5000": ("1,2,", 5000),
    "'the answer is. ' x5000": ("the answer is. ", 5000),
    "$ x20000": ("$", 20_000),
}


def extract_scaling(repeat: int) -> dict[str, tuple[float, float]]:
    from rewardlab.verifiers import get_verifier

    verifier = get_verifier("math")
    out = {}
    for name, (unit, n) in FLOODS.items():
        tail = "\\boxed{3}" if unit == "{" else ""
        times = []
        for k in (1, 4):
            text = unit * (n * k) + tail
            best = float("inf")
            for _ in range(repeat):
                start = time.perf_counter()
                verifier.extract(text)
                best = min(best, time.perf_counter() - start)
            times.append(best)
        out[name] = (times[0], times[1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--idle", type=float, default=1.0, help="seconds the stream waits before a request")
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--tool-timeout", type=float, default=0.3)
    args = parser.parse_args()
    print(
        f"operating point: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, workers {args.workers}, "
        f"idle {args.idle:g} s, {args.calls} stuck calls at {args.tool_timeout:g} s, median of {args.repeat}"
    )
    figures = stream_figures(args.workers, args.repeat, args.idle)
    ref = figures["busy"]
    print(f"stream busy (reference)   {ref * 1e3:8.2f} ms")
    for name in ("idle", "behind hostile"):
        print(f"stream {name:<18} {figures[name] * 1e3:8.2f} ms   x{figures[name] / ref:5.2f}  (target <= 3)")
    tool_s = tool_figure(args.calls, args.tool_timeout, args.repeat)
    print(
        f"tool timeout              {tool_s * 1e3:8.2f} ms   x{tool_s / args.tool_timeout:5.2f} of the timeout "
        f"(target <= 1.5; one after the other: x{args.calls})"
    )
    for name, (one, four) in extract_scaling(args.repeat).items():
        print(
            f"math extract {name:<28} {one * 1e3:8.2f} ms, 4x: {four * 1e3:8.2f} ms   x{four / one:5.2f}  (target <= 6)"
        )


if __name__ == "__main__":
    main()
