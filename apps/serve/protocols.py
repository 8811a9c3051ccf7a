"""The two request protocols of ``rewardlab serve``: parsing a decoded JSON body into records, and the answer.

``POST /score`` (rewardlab's, what the ``http:URL`` source sends, ``verifiers/remote.py``)::

    {"records": [{"id", "prompt", "completion", "reference", "metadata"}, ...]}
    -> {"results": [{"reward": float | null, "details": {...}, "error": str | null,
                     "reward_time_s": float | null}, ...]}

``POST /get_reward`` (OpenRLHF's ``--remote_rm_url``: ``openrlhf/utils/agent.py``, OpenRLHF 0.11.2, sends
``query`` = the decoded prompt + response tokens, ``prompts`` and ``labels``; ``cli/serve_rm.py`` answers)::

    {"query": [str, ...], "prompts": [str, ...], "labels": [any, ...]}
    -> {"rewards": [...], "scores": [...], "extra_logs": {"reward_error": [0.0 | 1.0, ...]}, "errors": [...]}

A request of the wrong shape raises :class:`Refused` (a 4xx with one line); a record that is an object
but cannot be scored is an error row, as in ``rewardlab score``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from rewardlab.scoring.jobs import as_record, rounded_time, verifier_field_problem
from rewardlab.types import Record, Result, jsonable

MIN_OVERLAP = 16
"""Fewest characters of a prompt's end that must start a query for the prompt to count as left-truncated."""


class Refused(Exception):
    """A request the server refuses as a whole: ``status`` (400, 401, 413, 422; 503 when busy), a one-line
    ``message`` (answered as ``{"error": message}``) and extra response ``headers``."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


def decode_json(body: bytes) -> Any:
    """The decoded JSON body. Raises :class:`Refused` (400) when it is not JSON."""
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise Refused(400, f"malformed JSON: {str(exc).splitlines()[0]}") from None


def _check_rows(n: int, max_rows: int) -> None:
    if n > max_rows:
        raise Refused(413, f"{n} rows in one request; this server takes at most {max_rows}")


def _object(payload: Any) -> dict[str, Any]:
    if not isinstance(payload, dict):
        raise Refused(422, f"the body must be a JSON object, got {_type(payload)}")
    return payload


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# ----------------------------------------------------------------------------------------------------------
# rewardlab's protocol: POST /score
# ----------------------------------------------------------------------------------------------------------
def parse_score_request(
    payload: Any, *, max_rows: int, source_name: str, verifier_field: str = "refuse"
) -> list[Record | Result]:
    """The records of a ``/score`` body, in order; a record the server refuses on its own is a failure
    :class:`Result` in its place.

    A missing ``id`` becomes the record's position in the request (as ``rewardlab score`` numbers lines).
    ``verifier_field`` says what a row's ``verifier`` field does: ``allow`` (it chooses the row's verifier,
    as in ``rewardlab score``), ``refuse`` (naming another source than ``source_name`` makes an error row: a
    client must not make the server run, say, code through the ``code`` verifier) or ``ignore`` (a reward
    model scores every row).
    """
    records = _object(payload).get("records")
    if not isinstance(records, list):
        raise Refused(422, f"'records' must be a list of objects, got {_type(records)}")
    _check_rows(len(records), max_rows)
    out: list[Record | Result] = []
    for i, row in enumerate(records):
        if not isinstance(row, dict):
            raise Refused(422, f"records[{i}] must be an object, got {_type(row)}")
        record = as_record(row, i)
        if verifier_field == "ignore":
            record.verifier = None
        refused = _row_verifier_problem(record, source_name) if verifier_field == "refuse" else None
        out.append(Result.failure(refused) if refused else record)
    return out


def _row_verifier_problem(record: Record, source_name: str) -> str | None:
    if record.verifier in (None, source_name) or verifier_field_problem(record.verifier):
        return None  # the engine says what is wrong with a verifier field that is not a name
    return (
        f"invalid record: this server scores with {source_name!r}; a row's 'verifier' "
        f"({record.verifier!r:.80}) cannot choose another (start it with --row-verifiers)"
    )


def score_response(results: Sequence[Result]) -> dict[str, Any]:
    """The ``/score`` answer: one ``{"reward", "details", "error", "reward_time_s"}`` per record, in order
    (``reward_time_s``: the seconds the pool took to score it, null for a record refused before scoring; the
    ``http:`` source reads the first three and ignores the rest)."""
    return {"results": [finite({**r.to_dict(), "reward_time_s": rounded_time(r.time_s)}) for r in results]}


# ----------------------------------------------------------------------------------------------------------
# OpenRLHF's protocol: POST /get_reward
# ----------------------------------------------------------------------------------------------------------
def parse_get_reward_request(payload: Any, *, max_rows: int) -> list[Record]:
    """The records of an OpenRLHF ``/get_reward`` body: ``query[i]`` is the decoded prompt and response,
    ``prompts[i]`` the prompt (the completion is the query after it), ``labels[i]`` the reference.

    ``prompts`` and ``labels`` may be absent (older clients send ``query`` only): the whole query is then
    the completion, and the reference ``None``.
    """
    body = _object(payload)
    queries = _string_list(body, "query", required=True)
    _check_rows(len(queries), max_rows)
    prompts = _string_list(body, "prompts", required=False)
    labels = body.get("labels")
    if labels is not None and not isinstance(labels, list):
        raise Refused(422, f"'labels' must be a list, got {_type(labels)}")
    for name, values in (("prompts", prompts), ("labels", labels)):
        if values is not None and len(values) != len(queries):
            raise Refused(422, f"'{name}' has {len(values)} entries for {len(queries)} queries")
    return [
        Record(
            id=i,
            prompt=prompts[i] if prompts is not None else "",
            completion=completion_of(query, prompts[i] if prompts is not None else ""),
            reference=labels[i] if labels is not None else None,
        )
        for i, query in enumerate(queries)
    ]


def _string_list(body: dict[str, Any], key: str, *, required: bool) -> list[str] | None:
    values = body.get(key)
    if values is None and not required:
        return None
    if not isinstance(values, list):
        raise Refused(422, f"'{key}' must be a list of strings, got {_type(values)}")
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise Refused(422, f"'{key}'[{i}] must be a string, got {_type(value)}")
    return values


def completion_of(query: str, prompt: str) -> str:
    """The response in an OpenRLHF query: the query after its prompt.

    OpenRLHF's trainer builds the query by decoding the prompt's tokens followed by the response's, so the
    query starts with the prompt; when the prompt was too long it keeps the prompt's last tokens, and the
    query starts with the prompt's end instead (at least ``MIN_OVERLAP`` characters of it, to count). A
    query that starts with neither (a tokenizer whose decoding changes the text) is scored whole.
    """
    if query.startswith(prompt):
        return query[len(prompt) :]
    overlap = _suffix_prefix_overlap(prompt, query)
    return query[overlap:] if overlap >= MIN_OVERLAP else query


def _suffix_prefix_overlap(prompt: str, query: str) -> int:
    """Length of the longest end of ``prompt`` that starts ``query`` (the prefix function of KMP over
    ``query`` + separator + ``prompt``: linear time, so a long prompt costs no more than reading it)."""
    head: list[str | None] = list(query[: len(prompt)])
    text = [*head, None, *prompt]  # None: a separator no character equals
    border = [0] * len(text)
    for i in range(1, len(text)):
        k = border[i - 1]
        while k and text[i] != text[k]:
            k = border[k - 1]
        border[i] = k + 1 if text[i] == text[k] else 0
    return border[-1]


def get_reward_response(results: Sequence[Result]) -> dict[str, Any]:
    """The ``/get_reward`` answer as OpenRLHF's ``serve_rm`` gives it (``rewards``, ``scores`` and
    ``extra_logs``, whose values must be numbers per query: the trainer makes tensors of them), and
    ``errors`` (the clients ignore it; a person reading the answer does not). Nothing else: no reward
    times, which OpenRLHF would not expect."""
    rewards = [_reward(r) for r in results]
    return {
        "rewards": rewards,
        "scores": rewards,
        "extra_logs": {"reward_error": [float(r.error is not None) for r in results]},
        "errors": [r.error for r in results],
    }


def _reward(result: Result) -> float | None:
    reward = result.reward
    return None if reward is None or not math.isfinite(reward) else float(reward)


# ----------------------------------------------------------------------------------------------------------
# JSON output
# ----------------------------------------------------------------------------------------------------------
def finite(value: Any) -> Any:
    """``value`` with every infinite or NaN float as its text (``"nan"``, ``"inf"``): JSON has no such
    numbers, and one in a verifier's details must not make the whole answer fail."""
    value = jsonable(value)
    try:
        json.dumps(value, allow_nan=False)
        return value
    except ValueError:
        return _finite(value)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
