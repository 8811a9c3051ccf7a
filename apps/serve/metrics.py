"""The server's counters, rendered as Prometheus' text format (``GET /metrics``); written by hand so that the
server needs no ``prometheus_client``.

Every name starts ``rewardlab_serve_``:

- ``requests_total{endpoint,status}``: answered requests (``endpoint`` is a known path or ``other``)
- ``request_duration_seconds{endpoint}``: a histogram of the time from the request to its answer
- ``rows_total{endpoint}``: rows scored; ``row_errors_total{kind}``: error rows by kind (the text before the
  error's first colon, ``rewardlab.types.error_kind``); ``missing_rewards_total``: rows with no reward
- ``chunks_total``, ``chunk_rows_total``: chunks of rows sent to the pool's workers (rows of concurrent
  requests share chunks), or batches scored in the server's process (reward models), and their rows
- ``pool_workers``, ``in_flight_requests``, ``queued_rows`` (gauges)
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence

from rewardlab.types import Result, error_kind

PREFIX = "rewardlab_serve_"
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""Upper bounds (seconds) of the latency histogram's buckets."""
MAX_ERROR_KINDS = 100
"""Distinct error kinds kept as labels; later ones count as ``other`` (a label per kind must stay bounded)."""


class Metrics:
    """Thread-safe counters of one server (the event loop and the pool's thread both write them).

    Args:
        gauges: name -> a function giving its current value, read at each render (pool size, queue).
    """

    def __init__(self, gauges: dict[str, Callable[[], float]] | None = None) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, int]] = Counter()
        self.rows: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.missing = 0
        self.chunks = 0
        self.chunk_rows = 0
        self.in_flight = 0
        self._latency: dict[str, list[float]] = {}  # endpoint -> [count per bucket..., sum, count]
        self.gauges = dict(gauges or {})

    def started(self) -> None:
        with self._lock:
            self.in_flight += 1

    def answered(self, endpoint: str, status: int, seconds: float) -> None:
        with self._lock:
            self.in_flight -= 1
            self.requests[(endpoint, status)] += 1
            counts = self._latency.setdefault(endpoint, [0.0] * (len(BUCKETS) + 2))
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    counts[i] += 1
            counts[-2] += seconds
            counts[-1] += 1

    def scored(self, endpoint: str, results: Sequence[Result]) -> None:
        with self._lock:
            self.rows[endpoint] += len(results)
            for result in results:
                kind = error_kind(result.error)
                if kind is not None:
                    known = kind in self.errors or len(self.errors) < MAX_ERROR_KINDS
                    self.errors[kind if known else "other"] += 1
                elif result.reward is None:
                    self.missing += 1

    def chunk(self, rows: int) -> None:
        """A chunk of ``rows`` sent to a worker, or a batch of them scored in process."""
        with self._lock:
            self.chunks += 1
            self.chunk_rows += rows

    def render(self) -> str:
        """The text format (version 0.0.4) of every metric."""
        with self._lock:
            lines = self._counters() + self._histogram()
            in_flight = self.in_flight
        lines += _family("in_flight_requests", "gauge", "Requests being answered.", [("", in_flight)])
        for name, read in self.gauges.items():
            lines += _family(name, "gauge", _GAUGE_HELP.get(name, name), [("", read())])
        return "\n".join(lines) + "\n"

    def _counters(self) -> list[str]:
        requests = [(_labels(endpoint=e, status=str(s)), n) for (e, s), n in sorted(self.requests.items())]
        lines = _family(
            "requests_total", "counter", "Requests answered, by endpoint and HTTP status.", requests
        )
        rows = [(_labels(endpoint=e), n) for e, n in sorted(self.rows.items())]
        lines += _family("rows_total", "counter", "Rows scored, by endpoint.", rows)
        errors = [(_labels(kind=k), n) for k, n in sorted(self.errors.items())]
        lines += _family("row_errors_total", "counter", "Error rows, by kind of error.", errors)
        lines += _family(
            "missing_rewards_total", "counter", "Rows with no reward (null).", [("", self.missing)]
        )
        lines += _family(
            "chunks_total",
            "counter",
            "Chunks sent to the workers, or batches scored in process.",
            [("", self.chunks)],
        )
        lines += _family("chunk_rows_total", "counter", "Rows in those chunks.", [("", self.chunk_rows)])
        return lines

    def _histogram(self) -> list[str]:
        name = PREFIX + "request_duration_seconds"
        lines = [
            f"# HELP {name} Seconds from a request to its answer, by endpoint.",
            f"# TYPE {name} histogram",
        ]
        for endpoint, counts in sorted(self._latency.items()):
            for bound, count in zip(BUCKETS, counts, strict=False):
                lines.append(f"{name}_bucket{_labels(endpoint=endpoint, le=repr(bound))} {_number(count)}")
            lines.append(f"{name}_bucket{_labels(endpoint=endpoint, le='+Inf')} {_number(counts[-1])}")
            lines.append(f"{name}_sum{_labels(endpoint=endpoint)} {_number(counts[-2])}")
            lines.append(f"{name}_count{_labels(endpoint=endpoint)} {_number(counts[-1])}")
        return lines


_GAUGE_HELP = {
    "pool_workers": "Worker processes of the scoring pool.",
    "queued_rows": "Rows submitted to the pool and not yet answered.",
}


def _family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> list[str]:
    full = PREFIX + name
    return [f"# HELP {full} {help_text}", f"# TYPE {full} {kind}"] + [
        f"{full}{labels} {_number(value)}" for labels, value in samples
    ]


def _labels(**labels: str) -> str:
    inner = ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items())
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
