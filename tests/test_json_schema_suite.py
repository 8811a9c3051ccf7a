"""The json verifier on the official JSON-Schema-Test-Suite (drafts 2020-12 and 7, the required tests).

Every case becomes records whose completion is the instance and whose reference is ``{"schema": ...}``:

- ``bare``: the instance's JSON text alone (any JSON value: the whole completion is read);
- ``fenced``: the instance in a ```json block between sentences, with ``allow_prose`` (any JSON value);
- ``prose``: the instance inline in a sentence, with ``allow_prose``; only objects and arrays, because a
  bare scalar in prose is never read as an answer (the balanced-span reading finds objects and arrays).

The verdict (reward 1) must equal the suite's ``valid`` except for the cases listed in ``DISAGREEMENTS``
with their reason. The suite's remotes (``http://localhost:1234/...``) come from the stored file through the
verifier's ``schemas`` setting, never the network. ``format`` is an annotation in the suite's required tests,
so the main runs use ``format_check=False``; ``test_format_assertion_differs_only_on_annotation_cases``
checks what the default (``format_check=True``) changes. Data: tests/data/json_schema_suite/README.md.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from rewardlab.types import Record
from rewardlab.verifiers import get_verifier

SUITE_FILE = Path(__file__).parent / "data" / "json_schema_suite" / "suite.json.gz"
DRAFTS = ("draft2020-12", "draft7")
VARIANTS = ("bare", "fenced", "prose")

_UNICODE_PROPERTY = (
    "Python's re has no Unicode property escapes (\\p{Letter}): the schema fails check_schema -> error row"
)
_VOCABULARY = "jsonschema does not implement $vocabulary: the validation keywords still apply (stricter)"
DISAGREEMENTS: dict[tuple[str, str, str, str], str] = {
    ("draft2020-12", "pattern.json", "pattern with Unicode property escape requires unicode mode", test): (
        _UNICODE_PROPERTY
    )
    for test in ("ASCII letters match", "Non-ASCII letters match", "Digits do not match")
}
DISAGREEMENTS |= {
    ("draft2020-12", "patternProperties.json", "patternProperties with Unicode property escape", test): (
        _UNICODE_PROPERTY
    )
    for test in ("Unicode letter property name matches", "Non-letter property name does not match pattern")
}
DISAGREEMENTS[
    (
        "draft2020-12",
        "vocabulary.json",
        "schema that uses custom metaschema with with no validation vocabulary",
        "no validation: invalid number, but it still validates",
    )
] = _VOCABULARY


@dataclass(frozen=True)
class SuiteCase:
    draft: str
    file: str
    group: str
    test: str
    schema: Any
    data: Any
    valid: bool

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.draft, self.file, self.group, self.test)


@cache
def load_suite() -> dict[str, Any]:
    """The stored suite: ``commit``, ``drafts`` (draft -> file -> groups) and ``remotes`` (URI -> schema)."""
    with gzip.open(SUITE_FILE, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def suite_cases(draft: str) -> Iterator[SuiteCase]:
    for file, groups in sorted(load_suite()["drafts"][draft].items()):
        for group in groups:
            for test in group["tests"]:
                yield SuiteCase(
                    draft,
                    file,
                    group["description"],
                    test["description"],
                    group["schema"],
                    test["data"],
                    test["valid"],
                )


def completion_for(case: SuiteCase, variant: str) -> tuple[str, dict[str, Any]] | None:
    """(completion, reference) of one variant of a case; ``None`` when the variant does not apply."""
    if variant == "bare":
        return json.dumps(case.data), {"schema": case.schema}
    if variant == "fenced":
        text = f"Here is the instance:\n\n```json\n{json.dumps(case.data, indent=2)}\n```\n\nIt follows the schema."
        return text, {"schema": case.schema, "allow_prose": True}
    if not isinstance(case.data, (dict, list)):
        return None
    return f"The instance is {json.dumps(case.data)}, as requested.", {
        "schema": case.schema,
        "allow_prose": True,
    }


def suite_verifier(draft: str, **settings: Any):
    defaults = {"format_check": False, "default_draft": draft.removeprefix("draft")}
    return get_verifier("json", schemas=load_suite()["remotes"], **{**defaults, **settings})


def run_variant(draft: str, variant: str, **settings: Any) -> tuple[int, dict[tuple, str]]:
    """(records scored, {case key: what went wrong}) for one draft and variant."""
    verifier = suite_verifier(draft, **settings)
    scored, wrong = 0, {}
    for case in suite_cases(draft):
        built = completion_for(case, variant)
        if built is None:
            continue
        completion, reference = built
        result = verifier.score(Record(completion=completion, reference=reference))
        scored += 1
        if result.error or (result.reward == 1.0) != case.valid:
            wrong[case.key] = result.error or result.details.get("reason") or f"scored {result.reward}"
    return scored, wrong


def test_suite_is_stored_with_its_commit():
    suite = load_suite()
    assert suite["commit"] == "44401e0c046704b476ec9d2e2fccdaee618f259d"
    assert len(suite["drafts"]["draft2020-12"]) == 46 and len(suite["drafts"]["draft7"]) == 37
    assert all(uri.startswith("http://localhost:1234/") for uri in suite["remotes"])
    assert (SUITE_FILE.parent / "LICENSE").read_text().startswith("Copyright (c) 2012 Julian Berman")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("draft", DRAFTS)
def test_suite_agreement(draft, variant):
    scored, wrong = run_variant(draft, variant)
    expected = {key for key in DISAGREEMENTS if key[0] == draft}
    if variant == "prose":  # the listed cases with scalar instances have no prose variant
        expected = {
            key
            for key in expected
            for case in suite_cases(draft)
            if case.key == key and isinstance(case.data, (dict, list))
        }
    assert set(wrong) == expected, {key: wrong.get(key) for key in set(wrong) ^ expected}
    sizes = {"draft2020-12": (1299, 789), "draft7": (927, 506)}[draft]
    assert scored == (sizes[1] if variant == "prose" else sizes[0])


def test_unicode_property_cases_are_error_rows_not_verdicts():
    _, wrong = run_variant("draft2020-12", "bare")
    for key, reason in DISAGREEMENTS.items():
        if reason == _UNICODE_PROPERTY:
            assert wrong[key].startswith("invalid schema: "), wrong[key]


def test_format_assertion_differs_only_on_annotation_cases():
    """With ``format_check=True`` (the default) the extra disagreements are exactly format.json's
    "invalid ... string is only an annotation by default" cases of 2020-12 (one per format jsonschema can
    check with the installed packages), now scored 0 by a format checker; draft 7's format.json has none."""
    for draft in DRAFTS:
        _, spec = run_variant(draft, "bare")
        _, asserted = run_variant(draft, "bare", format_check=True)
        extra = set(asserted) - set(spec)
        assert len(extra) == (8 if draft == "draft2020-12" else 0), sorted(extra)
        assert all(key[1] == "format.json" and "only an annotation" in key[3] for key in extra), extra
        assert all(asserted[key].startswith("invalid at $: ") for key in extra)


def test_wrapped_variants_cover_every_case():
    """The fenced variant reads every instance (scalars too); the prose variant skips only scalars."""
    for draft in DRAFTS:
        kinds = Counter(isinstance(case.data, (dict, list)) for case in suite_cases(draft))
        assert run_variant(draft, "fenced")[0] == kinds[True] + kinds[False]
        assert run_variant(draft, "prose")[0] == kinds[True]
