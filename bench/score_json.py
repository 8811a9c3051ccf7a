"""JSON scoring speed and agreement: rewardlab's ``json`` verifier vs ``jsonschema`` alone in a plain loop.

Two workloads, both sides in the same run, one process, one thread, best of ``--repeat`` passes:

- **suite**: every case of the official JSON-Schema-Test-Suite's required tests, drafts 2020-12 and 7
  (tests/data/json_schema_suite, 2,226 cases), the completion being the instance's JSON text. The
  reference parses it with ``json.loads`` and validates with the draft's validator class
  (``format`` an annotation, the suite's remotes in a ``referencing`` registry, as in the verifier), the
  validator built per row as a hand-written reward function does; a second reference keeps one validator
  per distinct schema (what the verifier's cache does).
- **llm**: ``--rows`` LLM-like structured outputs (deterministic for ``--seed``): five realistic schemas
  (orders, people, events with ``format: date``, tool calls with enums, nested configs) and completions in
  the shapes models write: bare JSON, a ```json fence between sentences, JSON inline in prose, a
  ``<think>`` block first, and the failures: wrong types, missing keys, hedges (an example, then a different
  answer), a JSON string holding JSON, a cut-off document. Every record allows prose. The reference is a
  typical hand-written reward: ``json.loads`` of the whole text, else of the first ```json fence, else of
  the first ``{`` to the last ``}``; then ``is_valid``.

Prints rows/s of both sides and the ratio (reference time / rewardlab time), then where the verdicts differ
on the llm set, by completion shape: those are the reference's false positives and negatives, by design.

    .venv/bin/python bench/score_json.py [--rows 20000] [--seed 0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import random
import re
import sys
from collections import Counter
from pathlib import Path

import jsonschema
import referencing
import referencing.jsonschema

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from _timing import best_of  # noqa: E402
from test_json_schema_suite import DRAFTS, load_suite, suite_cases  # noqa: E402

from rewardlab.types import Record  # noqa: E402
from rewardlab.verifiers import get_verifier  # noqa: E402

_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)

SCHEMAS = {
    "order": {
        "type": "object",
        "properties": {
            "order_id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
            "items": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "qty": {"type": "integer", "minimum": 1},
                        "price": {"type": "number", "minimum": 0},
                    },
                    "required": ["sku", "qty", "price"],
                    "additionalProperties": False,
                },
            },
            "express": {"type": "boolean"},
        },
        "required": ["order_id", "items"],
    },
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "email": {"type": "string", "format": "email"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    },
    "event": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "date": {"type": "string", "format": "date"},
            "attendees": {"type": "array", "items": {"$ref": "#/definitions/attendee"}},
        },
        "required": ["title", "date"],
        "definitions": {
            "attendee": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "rsvp": {"enum": ["yes", "no", "maybe"]}},
                "required": ["name", "rsvp"],
            }
        },
    },
    "tool_call": {
        "type": "object",
        "properties": {
            "tool": {"enum": ["search", "calculator", "weather"]},
            "arguments": {"type": "object", "minProperties": 1},
        },
        "required": ["tool", "arguments"],
        "additionalProperties": False,
    },
    "config": {
        "type": "object",
        "properties": {
            "model": {"type": "string"},
            "layers": {"type": "array", "items": {"$ref": "#/$defs/layer"}, "maxItems": 8},
        },
        "required": ["model", "layers"],
        "$defs": {
            "layer": {
                "type": "object",
                "properties": {"kind": {"enum": ["dense", "attention"]}, "width": {"type": "integer"}},
                "required": ["kind", "width"],
            }
        },
    },
}


def _instance(kind: str, rng: random.Random) -> dict:
    if kind == "order":
        items = [
            {
                "sku": f"SKU{rng.randint(1, 999)}",
                "qty": rng.randint(1, 5),
                "price": rng.randint(1, 9999) / 100,
            }
            for _ in range(rng.randint(1, 4))
        ]
        return {"order_id": f"ABC-{rng.randint(1000, 9999)}", "items": items, "express": rng.random() < 0.5}
    if kind == "person":
        name = rng.choice(["Ada", "Alan", "Grace", "Edsger"])
        return {
            "name": name,
            "age": rng.randint(18, 90),
            "email": f"{name.lower()}@example.com",
            "tags": ["x"],
        }
    if kind == "event":
        people = [{"name": n, "rsvp": rng.choice(["yes", "no", "maybe"])} for n in ("Ann", "Bo")]
        return {
            "title": "Standup",
            "date": f"2025-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
            "attendees": people,
        }
    if kind == "tool_call":
        return {"tool": rng.choice(["search", "weather"]), "arguments": {"query": "rain in Paris"}}
    layers = [{"kind": rng.choice(["dense", "attention"]), "width": 64 * rng.randint(1, 8)} for _ in range(3)]
    return {"model": "tiny", "layers": layers}


def _broken(kind: str, value: dict, rng: random.Random) -> dict:
    """An invalid variant: one required key dropped, or its type changed."""
    key = SCHEMAS[kind]["required"][rng.randrange(len(SCHEMAS[kind]["required"]))]
    value = dict(value)
    if rng.random() < 0.5:
        del value[key]
    else:
        value[key] = 12345 if isinstance(value[key], str) else "oops"
    return value


SHAPES = ("bare", "fence", "prose", "think", "invalid", "hedge", "string", "cut_off")


def _completion(shape: str, kind: str, rng: random.Random) -> tuple[str, bool]:
    """(completion, whether it deserves reward 1)."""
    value = _instance(kind, rng)
    text = json.dumps(value, indent=rng.choice([None, 2]))
    if shape == "bare":
        return text, True
    if shape == "fence":
        return (
            f"Here is the {kind} you asked for:\n\n```json\n{text}\n```\n\nLet me know if you need changes.",
            True,
        )
    if shape == "prose":
        return f"Sure. The {kind} is {json.dumps(value)} and it follows the schema.", True
    if shape == "think":
        return (
            f"<think>The user wants a {kind}. I will fill in every field.</think>\n```json\n{text}\n```",
            True,
        )
    if shape == "invalid":
        return f"```json\n{json.dumps(_broken(kind, value, rng), indent=2)}\n```", False
    if shape == "hedge":
        other = _broken(kind, value, rng)
        first, second = (other, value) if rng.random() < 0.5 else (value, other)
        return f"For example: {json.dumps(first)}\n\nFinal answer:\n```json\n{json.dumps(second)}\n```", False
    if shape == "string":
        return json.dumps(json.dumps(value)), False
    return f"```json\n{text[: len(text) * 2 // 3]}", False


def llm_rows(rows: int, seed: int) -> list[tuple[Record, str, bool]]:
    rng = random.Random(seed)
    out = []
    for _ in range(rows):
        kind = rng.choice(list(SCHEMAS))
        shape = rng.choice(SHAPES)
        completion, deserved = _completion(shape, kind, rng)
        reference = {"schema": SCHEMAS[kind], "allow_prose": True}
        out.append((Record(completion=completion, reference=reference), shape, deserved))
    return out


def _reference_registry(remotes: dict) -> referencing.Registry:
    return referencing.Registry().with_resources(
        (
            uri,
            referencing.Resource.from_contents(
                schema, default_specification=referencing.jsonschema.DRAFT202012
            ),
        )
        for uri, schema in remotes.items()
    )


def _naive_read(text: str):
    """A hand-written reward function's reading: the whole text, the first fence, or first { to last }."""
    for candidate in (
        text,
        *(m.group(1) for m in _FENCE.finditer(text)),
        text[text.find("{") : text.rfind("}") + 1],
    ):
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return None


def suite_bench(repeat: int) -> None:
    remotes = load_suite()["remotes"]
    registry = _reference_registry(remotes)
    rows = []
    for draft in DRAFTS:
        cls = jsonschema.Draft202012Validator if draft == "draft2020-12" else jsonschema.Draft7Validator
        verifier = get_verifier(
            "json", default_draft=draft.removeprefix("draft"), format_check=False, schemas=remotes
        )
        for case in suite_cases(draft):
            rows.append(
                (verifier, cls, Record(completion=json.dumps(case.data), reference={"schema": case.schema}))
            )

    def reference(cached: bool):
        validators = {}

        def run():
            for _, cls, record in rows:
                schema = record.reference["schema"]
                key = (cls, json.dumps(schema, sort_keys=True)) if cached else None
                validator = validators.get(key) if cached else None
                if validator is None:
                    validator = cls(schema, registry=registry)
                    if cached:
                        validators[key] = validator
                # the suite's few schemas Python's re cannot compile (\\p{Letter}) raise: an error row, like ours
                with contextlib.suppress(Exception):
                    validator.is_valid(json.loads(record.completion))

        return run

    ours = best_of(repeat, lambda: [verifier.score(record) for verifier, _, record in rows])
    naive = best_of(repeat, reference(cached=False))
    cached = best_of(repeat, reference(cached=True))
    n = len(rows)
    print(f"\nsuite: {n} rows (JSON-Schema-Test-Suite, drafts 2020-12 and 7, the instance as the completion)")
    print(f"  {'rewardlab json (score loop)':44s}{n / ours:10.0f} rows/s")
    print(
        f"  {'jsonschema, validator built per row':44s}{n / naive:10.0f} rows/s   ratio {naive / ours:5.2f}x"
    )
    print(
        f"  {'jsonschema, one validator per schema':44s}{n / cached:10.0f} rows/s   ratio {cached / ours:5.2f}x"
    )


def llm_bench(rows: int, seed: int, repeat: int) -> None:
    data = llm_rows(rows, seed)
    verifier = get_verifier("json")

    def reference():
        verdicts = []
        for record, _, _ in data:
            schema = record.reference["schema"]
            value = _naive_read(record.completion)
            cls = jsonschema.validators.validator_for(schema)
            verdicts.append(
                value is not None and cls(schema, format_checker=cls.FORMAT_CHECKER).is_valid(value)
            )
        return verdicts

    ours = best_of(repeat, lambda: [verifier.score(record) for record, _, _ in data])
    theirs = best_of(repeat, reference)
    print(f"\nllm: {len(data)} rows (LLM-like outputs, 5 schemas, {len(SHAPES)} shapes, prose allowed)")
    print(f"  {'rewardlab json (score loop)':44s}{len(data) / ours:10.0f} rows/s")
    print(
        f"  {'naive reading + jsonschema per row':44s}{len(data) / theirs:10.0f} rows/s   ratio {theirs / ours:5.2f}x"
    )

    ours_verdicts = [verifier.score(record).reward == 1.0 for record, _, _ in data]
    naive_verdicts = reference()
    table = Counter()
    for (_, shape, deserved), mine, naive in zip(data, ours_verdicts, naive_verdicts, strict=True):
        table[(shape, "rewardlab", mine == deserved)] += 1
        table[(shape, "naive", naive == deserved)] += 1
    print("  verdicts equal to the deserved reward, by shape (rewardlab / naive reference):")
    for shape in SHAPES:
        total = table[(shape, "rewardlab", True)] + table[(shape, "rewardlab", False)]
        print(
            f"    {shape:8s} {table[(shape, 'rewardlab', True)]:6d}/{total:<6d} {table[(shape, 'naive', True)]:6d}/{total}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="rows of the LLM-like set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per side; the best is kept")
    args = parser.parse_args()
    print(
        f"one process, one thread, Python {platform.python_version()}, jsonschema "
        f"{__import__('importlib.metadata').metadata.version('jsonschema')}, best of {args.repeat}"
    )
    suite_bench(args.repeat)
    llm_bench(args.rows, args.seed, args.repeat)
    print(
        "\n(ratio = reference time / rewardlab time; rewardlab reads, refuses and builds details on every row)"
    )


if __name__ == "__main__":
    main()
