"""``JSONVerifier``: structured-output rewards, a completion's JSON value validated against the record's JSON
Schema (``jsonschema``; drafts 2020-12, 2019-09, 7, 6, 4, 3 by ``$schema``).

The reference is ``{"schema": <schema>}`` (a dict, or its JSON text; the schema may be JSON text too), with
an optional ``"allow_prose": true|false`` that overrides the verifier's setting for that row. The reading
rules (what counts as the answer, hedges, prose) are in :mod:`.extract`; the schema side (drafts, cache,
``$ref`` without network, deadline, error paths) in :mod:`.schema`; the policy in docs/json.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

import referencing.exceptions

from rewardlab.types import Record, Result
from rewardlab.verifiers.base import Verifier
from rewardlab.verifiers.json.extract import Extraction, extract_json
from rewardlab.verifiers.json.schema import (
    DRAFTS,
    SchemaCache,
    SchemaProblem,
    ValidationTimeout,
    deadline,
    required_share,
    validation_errors,
)

MODES = ("strict", "partial")
REFERENCE_KEYS = ("schema", "allow_prose")
_MAX_DEPTH_LIMIT = 512  # deeper documents risk the interpreter's recursion limit inside the validator


@dataclass
class JSONConfig:
    """Settings of :class:`JSONVerifier` (``get_verifier("json", **settings)``, ``--config key=value``)."""

    mode: str = "strict"
    """``strict``: 1 when the document is valid, else 0. ``partial``: a valid document scores 1; an invalid
    one scores ``k / (n + 1)``, ``k`` of the schema's ``n`` top-level ``required`` keys being present and
    valid against their ``properties`` subschemas (the ``+ 1`` is the whole document's validity, so an
    invalid document never reaches 1). Unreadable completions (no JSON, hedge, prose) score 0 in both."""
    allow_prose: bool = False
    """Text around the JSON (and its fence) is accepted. Off: any non-whitespace outside it scores 0. A
    record's reference ``"allow_prose"`` overrides this for that row."""
    default_draft: str = "2020-12"
    """The draft of a schema without ``$schema``: 2020-12, 2019-09, 7, 6, 4 or 3."""
    format_check: bool = True
    """``format`` is asserted (``date``, ``email``, ``ipv4``, ``ipv6``, ``uuid``, ``regex``... the checkers
    ``jsonschema`` has with the installed packages); False: ``format`` is an annotation, as the 2020-12
    specification's default (and the official test suite's) has it."""
    max_chars: int = 500_000
    """The longest answer text (after ``</think>``) read; longer scores 0 before any parsing."""
    max_depth: int = 64
    """The deepest nesting of objects/arrays parsed; deeper scores 0 (checked by a linear scan before
    parsing). At most 512."""
    timeout: float | None = 5.0
    """Seconds for checking a schema and validating one document (a wall-clock timer on the main thread;
    a catastrophic regex ``pattern`` is interrupted). ``None``: no own timer. The scoring engine's per-item
    kill is always the hard limit."""
    max_errors: int = 5
    """Validation errors listed in ``details["errors"]`` (the best match first)."""
    schemas: dict[str, Any] = field(default_factory=dict)
    """A local registry: URI -> schema, for ``$ref`` to schemas outside the record's (the test suite's
    ``http://localhost:1234/...`` remotes). Nothing else is ever retrieved: no network."""
    schema_cache_size: int = 1024
    """Distinct schemas kept checked and compiled."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        self.default_draft = str(self.default_draft)
        if self.default_draft not in DRAFTS:
            raise ValueError(f"default_draft must be one of {', '.join(DRAFTS)}, got {self.default_draft!r}")
        for name in ("allow_prose", "format_check"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if not 1 <= self.max_depth <= _MAX_DEPTH_LIMIT:
            raise ValueError(f"max_depth must be between 1 and {_MAX_DEPTH_LIMIT}, got {self.max_depth}")
        for name in ("max_chars", "max_errors", "schema_cache_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds or None, got {self.timeout!r}")
        if not isinstance(self.schemas, dict) or not all(isinstance(uri, str) for uri in self.schemas):
            raise ValueError("schemas must map URIs (strings) to schemas")


@dataclass
class Reference:
    """A record's reference, read: the schema and the row's own ``allow_prose`` (``None``: the setting)."""

    schema: Any
    allow_prose: bool | None


def read_reference(reference: Any) -> Reference:
    """``{"schema": ..., "allow_prose": ...}`` (or its JSON text) read; raises ``ValueError`` with a one-line
    reason when it is malformed. A bare schema is refused: a wrapper with a misspelt key would otherwise be a
    schema that accepts everything."""
    if isinstance(reference, str):
        try:
            reference = json.loads(reference)
        except ValueError as exc:
            raise ValueError(f"the reference is not JSON ({exc})") from None
    if not isinstance(reference, dict) or "schema" not in reference:
        raise ValueError('the reference must be {"schema": <JSON Schema>, "allow_prose": <optional bool>}')
    unknown = sorted(set(reference) - set(REFERENCE_KEYS))
    if unknown:
        raise ValueError(f"unknown reference key(s) {unknown} (known: {', '.join(REFERENCE_KEYS)})")
    schema = reference["schema"]
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise ValueError(f"the schema text is not JSON ({exc})") from None
    allow_prose = reference.get("allow_prose")
    if allow_prose is not None and not isinstance(allow_prose, bool):
        raise ValueError(f"allow_prose must be true or false, got {allow_prose!r}")
    return Reference(schema=schema, allow_prose=allow_prose)


class JSONVerifier(Verifier):
    """1 when the completion commits to one JSON value and it is valid against the record's schema, else 0
    (or partial credit in ``mode="partial"``).

    ``details``: ``extracted`` (the JSON text read), ``extracted_span`` (``[start, end)`` in the completion
    text), ``method`` (``whole``, ``fence``, ``last_balanced``; ``None`` when nothing was read), ``valid``
    (``None`` when not validated), ``errors`` (``{"path", "message", "validator", "schema_path"}``, best match
    first), ``correct``, ``draft``, ``reason`` when the reward is 0 (and ``competing`` for a hedge); in partial
    mode ``required_valid`` / ``required_total``. A malformed reference, an invalid schema, an unresolvable
    ``$ref`` or a timeout is an error row (``Result.failure``).
    """

    name = "json"

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        known = [f.name for f in fields(JSONConfig)]
        unknown = sorted(set(config) - set(known))
        if unknown:
            raise ValueError(f"unknown json verifier option(s) {unknown} (known: {known})")
        self.settings = JSONConfig(**config)
        self.schemas = SchemaCache(
            default_draft=self.settings.default_draft,
            format_check=self.settings.format_check,
            local_schemas=self.settings.schemas,
            size=self.settings.schema_cache_size,
        )

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["config"])

    def read(self, text: str, *, allow_prose: bool | None = None) -> Extraction:
        """The JSON value ``text`` commits to (see :mod:`rewardlab.verifiers.json.extract`)."""
        return extract_json(
            text,
            allow_prose=self.settings.allow_prose if allow_prose is None else allow_prose,
            max_chars=self.settings.max_chars,
            max_depth=self.settings.max_depth,
        )

    def verify(self, record: Record) -> Result:
        try:
            reference = read_reference(record.reference)
        except ValueError as exc:
            return Result.failure(f"invalid reference: {exc}")
        read = self.read(record.completion_text, allow_prose=reference.allow_prose)
        details: dict[str, Any] = {
            "extracted": read.text,
            "extracted_span": list(read.span) if read.span else None,
            "method": read.method,
            "valid": None,
            "errors": [],
            "correct": False,
            "draft": None,
        }
        # One deadline covers checking a new schema and validating: both run the schema's regexes.
        try:
            with deadline(self.settings.timeout):
                compiled = self.schemas.get(reference.schema)
                details["draft"] = compiled.draft
                if not read.ok:
                    details["reason"] = read.reason
                    if read.competing is not None:
                        details["competing"] = read.competing
                    return Result(reward=0.0, details=details)
                errors = validation_errors(compiled, read.value, self.settings.max_errors)
                partial = errors and self.settings.mode == "partial"
                share = required_share(compiled, read.value) if partial else None
        except SchemaProblem as exc:
            return Result.failure(f"invalid schema: {exc}")
        except referencing.exceptions.Unresolvable as exc:
            return Result.failure(
                f"invalid schema: unresolvable $ref ({exc}); remote schemas are never fetched", **details
            )
        except ValidationTimeout as exc:
            return Result.failure(f"timeout: checking the schema and validating ran {exc}", **details)
        except RecursionError:
            return Result.failure("validation error: recursion too deep", **details)
        return self._judge(errors, share, details)

    @staticmethod
    def _judge(
        errors: list[dict[str, Any]], share: tuple[int, int] | None, details: dict[str, Any]
    ) -> Result:
        valid = not errors
        details.update(valid=valid, errors=errors, correct=valid)
        if valid:
            return Result(reward=1.0, details=details)
        details["reason"] = f"invalid at {errors[0]['path']}: {errors[0]['message']}"
        if share is None:
            return Result(reward=0.0, details=details)
        good, total = share
        details.update(required_valid=good, required_total=total)
        return Result(reward=good / (total + 1), details=details)
