"""JSON Schema side of the ``json`` verifier: the draft a schema asks for, checked and compiled validators kept
per distinct schema, ``$ref`` resolution that never touches the network, bounded validation and error rows.

Validation is the ``jsonschema`` library's. The verifier adds:

- the validator class from the schema's ``$schema`` (``validator_for``), the configured default draft when it
  has none, and a refusal for a ``$schema`` that names no draft ``jsonschema`` knows (silently validating
  under another draft could accept what the author's draft rejects);
- ``check_schema`` once per distinct schema (an invalid schema is an error row, never a verdict);
- a ``referencing`` registry that holds only the draft meta-schemas and the schemas the user gave
  (``schemas``: URI -> schema, e.g. the test suite's ``remotes/``); any other ``$ref`` target is refused,
  never retrieved;
- a wall-clock deadline on a process's main thread (``signal.setitimer``; Python's regex engine checks for
  signals, so a catastrophically backtracking ``pattern`` is interrupted too). Off the main thread there is
  no soft deadline: the scoring engine's per-item kill is the bound.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
import orjson
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema.exceptions import ValidationError, best_match, relevance

from rewardlab.verifiers.json.extract import canonical

DRAFTS: dict[str, type[Any]] = {
    "2020-12": jsonschema.Draft202012Validator,
    "2019-09": jsonschema.Draft201909Validator,
    "7": jsonschema.Draft7Validator,
    "6": jsonschema.Draft6Validator,
    "4": jsonschema.Draft4Validator,
    "3": jsonschema.Draft3Validator,
}
DRAFT_NAMES = {cls: name for name, cls in DRAFTS.items()}
_MESSAGE_CHARS = 300
_META_SCHEMA_HOPS = 4  # custom meta-schemas followed to a known draft
_COLLECTED_ERRORS = 100  # errors gathered to pick the best match from; the rest are never computed


class SchemaProblem(ValueError):
    """The schema (or a ``$ref`` it makes) cannot be used: the row is an error, not a verdict."""


class ValidationTimeout(Exception):
    """Checking a schema or validating an instance ran past the deadline."""


@dataclass
class CompiledSchema:
    """A checked schema and its validator (reusable across instances)."""

    validator: Any
    draft: str


def _refuse_retrieval(uri: str) -> referencing.Resource:
    raise referencing.exceptions.NoSuchResource(ref=uri)


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Raises :class:`ValidationTimeout` in the block after ``seconds`` of wall time, on the main thread
    when no other interval timer is running; elsewhere a no-op (the scoring engine's kill is the bound)."""
    if (
        not seconds
        or threading.current_thread() is not threading.main_thread()
        or signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0)
    ):
        yield
        return

    def _expire(signum: int, frame: Any) -> None:
        raise ValidationTimeout(f"over the {seconds:g} s timeout")

    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class SchemaCache:
    """Checked, compiled schemas by content (a bounded LRU), each validating under its own draft with a
    registry that resolves only meta-schemas and the local ``schemas``."""

    def __init__(
        self,
        *,
        default_draft: str,
        format_check: bool,
        local_schemas: Mapping[str, Any],
        size: int,
    ) -> None:
        self.default = DRAFTS[default_draft]
        self.format_check = format_check
        self.local_schemas = dict(local_schemas)
        self.size = size
        self._compiled: OrderedDict[bytes, CompiledSchema | str] = OrderedDict()
        self._registries: dict[type[Any], referencing.Registry] = {}

    def registry(self, cls: type[Any]) -> referencing.Registry:
        """The registry of ``cls``'s draft: the local schemas (read as that draft unless they say
        ``$schema``), and a retrieval that refuses every other URI."""
        if cls not in self._registries:
            spec = referencing.jsonschema.specification_with(cls.ID_OF(cls.META_SCHEMA))
            resources = [
                (uri, referencing.Resource.from_contents(contents, default_specification=spec))
                for uri, contents in self.local_schemas.items()
            ]
            registry = referencing.Registry(retrieve=_refuse_retrieval).with_resources(resources)
            self._registries[cls] = registry.crawl()
        return self._registries[cls]

    def get(self, schema: Any) -> CompiledSchema:
        """The compiled ``schema``; raises :class:`SchemaProblem` (remembered) when it is unusable."""
        key = _schema_key(schema)
        if key in self._compiled:
            self._compiled.move_to_end(key)
            found = self._compiled[key]
        else:
            found = self._compile(schema)
            self._compiled[key] = found
            if len(self._compiled) > self.size:
                self._compiled.popitem(last=False)
        if isinstance(found, str):
            raise SchemaProblem(found)
        return found

    def _draft_of(self, dialect: str) -> type[Any] | None:
        """The validator class of a ``$schema``: a draft ``jsonschema`` knows, or a custom meta-schema among
        the local schemas, which validates under the draft its own ``$schema`` names (``$vocabulary`` is
        not implemented by ``jsonschema``: every keyword of that draft applies, the stricter reading)."""
        for _ in range(_META_SCHEMA_HOPS):
            cls = jsonschema.validators.validator_for({"$schema": dialect}, default=None)
            if cls is not None:
                return cls
            meta = self.local_schemas.get(dialect, self.local_schemas.get(dialect.rstrip("#")))
            dialect = meta.get("$schema") if isinstance(meta, dict) else None
            if not isinstance(dialect, str):
                return None
        return None

    def _compile(self, schema: Any) -> CompiledSchema | str:
        if not isinstance(schema, (dict, bool)):
            return f"a schema is an object or a boolean, got {type(schema).__name__}"
        dialect = schema.get("$schema") if isinstance(schema, dict) else None
        if dialect is not None and not isinstance(dialect, str):
            return f"$schema must be a string, got {type(dialect).__name__}"
        cls = self._draft_of(dialect) if dialect else self.default
        if cls is None:
            return f"unknown $schema {dialect!r} (known drafts: {', '.join(DRAFTS)}, or a local meta-schema)"
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            path = error_path(exc.absolute_path)
            return f"{_short(exc.message)} (at {path} in the schema)"
        checker = cls.FORMAT_CHECKER if self.format_check else None
        validator = cls(schema, registry=self.registry(cls), format_checker=checker)
        return CompiledSchema(validator=validator, draft=DRAFT_NAMES.get(cls, cls.__name__))


def _schema_key(schema: Any) -> bytes:
    """The cache key of a schema: its canonical JSON (orjson when it can; the standard library for what
    orjson refuses, such as integers over 64 bits)."""
    try:
        return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        pass
    try:
        return canonical(schema).encode()
    except (TypeError, ValueError) as exc:
        raise SchemaProblem(f"the schema is not JSON ({exc})") from None


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 3] + "..."


def error_path(parts: Any) -> str:
    """A JSONPath for a deque of keys and indices: ``$.items[2].price``; keys that are not identifiers
    are quoted (``$["a b"]``) so that no two locations print the same."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{canonical(part)}]"
    return out


def _error_row(error: ValidationError) -> dict[str, Any]:
    schema_path = "/".join(str(part) for part in error.absolute_schema_path)
    return {
        "path": error_path(error.absolute_path),
        "message": _short(error.message),
        "validator": error.validator,
        "schema_path": f"#/{schema_path}",
    }


def validation_errors(compiled: CompiledSchema, instance: Any, limit: int) -> list[dict[str, Any]]:
    """At most ``limit`` errors of ``instance``, the best match (jsonschema's ``best_match``) first; empty
    when it is valid. Raises ``referencing``'s ``Unresolvable`` for a ``$ref`` that cannot be resolved."""
    errors = list(itertools.islice(compiled.validator.iter_errors(instance), _COLLECTED_ERRORS))
    if not errors:
        return []
    best = best_match(errors)
    rest = sorted((e for e in errors if e is not best), key=relevance)
    return [_error_row(e) for e in [best, *rest][:limit]]


def required_share(compiled: CompiledSchema, instance: Any) -> tuple[int, int]:
    """(keys present and valid, keys) over the schema's top-level ``required`` keys; each present key is
    validated against its ``properties`` subschema (references resolve against the whole schema)."""
    schema = compiled.validator.schema
    required = schema.get("required") if isinstance(schema, dict) else None
    if not isinstance(required, list):
        return 0, 0
    keys = list(dict.fromkeys(k for k in required if isinstance(k, str)))
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    if not isinstance(instance, dict):
        return 0, len(keys)
    good = 0
    for key in keys:
        if key in instance:
            sub = compiled.validator.evolve(schema=properties.get(key, True))
            good += next(iter(sub.iter_errors(instance[key])), None) is None
    return good, len(keys)
