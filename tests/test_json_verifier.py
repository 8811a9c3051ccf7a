"""The json verifier: reading the JSON value, the refusals (hedges, prose, near-JSON), validation, error rows.

The official JSON-Schema-Test-Suite runs in tests/test_json_schema_suite.py; the policy is docs/json.md.
"""

from __future__ import annotations

import pickle
import time

import pytest

from rewardlab.types import Record
from rewardlab.verifiers import get_verifier
from rewardlab.verifiers.json import JSONVerifier, extract_json, parse_json
from rewardlab.verifiers.json import extract as extract_module
from rewardlab.verifiers.json.extract import JSONTextError, balanced_spans, nesting_depth

ITEM = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "price": {"type": "number", "minimum": 0}},
    "required": ["name", "price"],
    "additionalProperties": False,
}
ORDER = {
    "type": "object",
    "properties": {"customer": {"type": "string"}, "items": {"type": "array", "items": ITEM}},
    "required": ["customer", "items"],
}
PERSON = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
GOOD = '{"customer": "Ada", "items": [{"name": "pen", "price": 2.5}]}'
OTHER = '{"customer": "Bob", "items": []}'


def score(completion, schema=ORDER, allow_prose=None, **settings):
    reference = {"schema": schema} if allow_prose is None else {"schema": schema, "allow_prose": allow_prose}
    return get_verifier("json", **settings).score(Record(completion=completion, reference=reference))


# -------------------------------------------------------------------------------------------------- reading
@pytest.mark.parametrize(
    ("completion", "method"),
    [
        (GOOD, "whole"),
        (f"  \n{GOOD}\n ", "whole"),
        (f"```json\n{GOOD}\n```", "fence"),
        (f"```\n{GOOD}\n```", "fence"),
        (f"```JSON\n{GOOD}\n```\n", "fence"),
        (f"<think>maybe {OTHER}?</think>\n{GOOD}", "whole"),
        (f"<think>a</think><think>b {OTHER}</think>{GOOD}", "whole"),
    ],
)
def test_reads_the_json_without_prose(completion, method):
    result = score(completion)
    assert result.reward == 1.0 and result.error is None, result.details
    assert result.details["method"] == method
    start, end = result.details["extracted_span"]
    assert completion[start:end] == result.details["extracted"] == GOOD
    assert result.details["correct"] is True and result.details["valid"] is True
    assert result.details["draft"] == "2020-12" and "reason" not in result.details


@pytest.mark.parametrize(
    ("completion", "method"),
    [
        (f"Here is the order:\n```json\n{GOOD}\n```\nAnything else?", "fence"),
        (f"The order is {GOOD}. Done.", "last_balanced"),
        (f"Sure! {GOOD}", "last_balanced"),
        (f"Here it is, shown twice: {GOOD}\n```json\n{GOOD}\n```", "fence"),  # the same value twice
        (f'Note "quotes" and (parens).\n\n{GOOD}\nThat is all.', "last_balanced"),
        (f"I'll write {{braces}} and [citation needed] in prose. {GOOD}", "last_balanced"),
        (f"```python\nprint('hi')\n```\nResult:\n```json\n{GOOD}\n```", "fence"),
    ],
)
def test_reads_the_json_in_prose_when_allowed(completion, method):
    by_reference = score(completion, allow_prose=True)
    by_setting = get_verifier("json", allow_prose=True).score(
        Record(completion=completion, reference={"schema": ORDER})
    )
    for result in (by_reference, by_setting):
        assert result.reward == 1.0, result.details
        assert result.details["method"] == method
        start, end = result.details["extracted_span"]
        assert completion[start:end] == GOOD


def test_prose_is_refused_unless_allowed():
    completion = f"Here is the order:\n```json\n{GOOD}\n```"
    refused = score(completion)
    assert refused.reward == 0.0 and refused.error is None
    assert "allow_prose is off" in refused.details["reason"] and refused.details["extracted"] == GOOD
    # the row's reference overrides the setting, both ways
    assert score(completion, allow_prose=True).reward == 1.0
    assert (
        get_verifier("json", allow_prose=True)
        .score(Record(completion=completion, reference={"schema": ORDER, "allow_prose": False}))
        .reward
        == 0.0
    )


def test_any_json_value_is_read_when_it_is_the_whole_completion():
    assert score('"hello"', {"type": "string"}).reward == 1.0
    assert score("42", {"type": "integer"}).reward == 1.0
    assert score("```json\nnull\n```", {"type": "null"}).reward == 1.0
    # a scalar in prose is not an answer: only objects and arrays are found there
    assert (
        score("The answer is 42.", {"type": "integer"}, allow_prose=True)
        .details["reason"]
        .startswith("no JSON")
    )


def test_chat_completion_reads_the_last_message():
    messages = [{"role": "user", "content": "order?"}, {"role": "assistant", "content": GOOD}]
    assert get_verifier("json").score(Record(completion=messages, reference={"schema": ORDER})).reward == 1.0


# -------------------------------------------------------------------------------------------------- hacks
# (name, completion, schema): each must score 0 in every mode, with prose allowed or not.
HACKS = [
    ("json string holding json", '"{\\"customer\\": \\"Ada\\", \\"items\\": []}"', ORDER),
    ("json string holding json in a fence", '```json\n"{\\"name\\": \\"x\\"}"\n```', PERSON),
    ("json string holding json in prose", 'Answer: "{\\"name\\": \\"x\\"}"', PERSON),
    (
        "example then a different final json",
        f'For example {{"customer": "X", "items": []}}. Final: {GOOD}',
        ORDER,
    ),
    ("two balanced objects", f"{OTHER}\n{GOOD}", ORDER),
    ("two fences with different json", f"```json\n{OTHER}\n```\nor\n```json\n{GOOD}\n```", ORDER),
    (
        "fence and a different object in prose",
        f'```json\n{GOOD}\n```\nAlternatively {{"customer": 1}}',
        ORDER,
    ),
    ("valid object, then broken json", f'{GOOD}\nCorrection: {{"customer": "Ada", "items": [}}', ORDER),
    ("valid object, then a cut-off one", f'{GOOD}\nCorrection: {{"customer": "Ada", "items": [', ORDER),
    ("valid object inside a malformed one", '{"result": {"name": "x"} ]', PERSON),
    ("NaN", '{"customer": "Ada", "items": [{"name": "pen", "price": NaN}]}', ORDER),
    ("Infinity", '{"customer": "Ada", "items": [{"name": "pen", "price": Infinity}]}', ORDER),
    ("-Infinity", '{"name": "x", "n": -Infinity}', PERSON),
    ("duplicate keys", '{"name": 5, "name": "x"}', PERSON),
    ("duplicate keys nested", '{"name": "x", "o": {"a": 1, "a": 2}}', PERSON),
    ("trailing comma", '{"name": "x",}', PERSON),
    ("single quotes", "{'name': 'x'}", PERSON),
    ("comment", '{"name": "x" /* ok */}', PERSON),
    ("python literal", '{"name": "x", "ok": True}', PERSON),
    ("raw newline in a string", '{"name": "a\nb"}', PERSON),
    ("json only in the reasoning", '<think>{"name": "x"}</think>The answer is above.', PERSON),
    ("reasoning never closed", '<think>so {"name": "x"}', PERSON),
    ("cut-off fence", '```json\n{"name": "x"}\n', PERSON),
    ("cut-off document around a valid one", 'Answer: {"result": {"name": "x"}', PERSON),
    ("empty", "   ", PERSON),
    ("no json", "I cannot produce that.", PERSON),
    ("schema-shaped prose", "name: x", PERSON),
    ("wrong type", '{"name": 5}', PERSON),
    ("array of the object", '[{"name": "x"}]', PERSON),
]


@pytest.mark.parametrize(("name", "completion", "schema"), HACKS, ids=[h[0] for h in HACKS])
@pytest.mark.parametrize("mode", ["strict", "partial"])
@pytest.mark.parametrize("allow_prose", [False, True])
def test_reward_hacks_score_zero(name, completion, schema, mode, allow_prose):
    result = score(completion, schema, allow_prose=allow_prose, mode=mode)
    assert result.reward == 0.0, (name, result.details)
    assert result.error is None and result.details["correct"] is False
    assert result.details["reason"]


def test_hedge_details_name_the_competing_json():
    result = score(f"For example {OTHER}. Final answer: {GOOD}", allow_prose=True)
    assert result.details["reason"].startswith("hedge")
    assert result.details["extracted"] == GOOD and result.details["competing"] == OTHER


def test_refusal_reasons():
    assert "duplicate key 'name'" in score('{"name": 5, "name": "x"}', PERSON).details["reason"]
    assert "NaN is not JSON" in score('{"name": NaN}', PERSON).details["reason"]
    assert "never closed" in score('<think>{"name": "x"}', PERSON).details["reason"]
    assert "never closed" in score('```json\n{"name": "x"}', PERSON, allow_prose=True).details["reason"]


def test_a_brace_inside_a_string_is_not_a_delimiter():
    completion = 'Result: {"name": "a } b { c ] [", "note": "\\"}{\\""} -- done'
    result = score(completion, PERSON, allow_prose=True)
    assert result.reward == 1.0 and result.details["extracted"] == completion[8:-8]
    spans, broken = balanced_spans(completion, 0, len(completion))
    assert [completion[s:e] for s, e in spans] == [completion[8:-8]] and broken == []


# -------------------------------------------------------------------------------------------------- limits
def test_size_and_depth_limits_are_checked_before_parsing(monkeypatch):
    def no_parse(*args, **kwargs):
        raise AssertionError("parsed")

    deep = "[" * 70 + "]" * 70
    monkeypatch.setattr(extract_module.json, "loads", no_parse)
    too_deep = extract_json(deep, allow_prose=False, max_chars=10_000, max_depth=64)
    assert "nested deeper than max_depth=64" in too_deep.reason
    too_long = extract_json("[1]" + " " * 100, allow_prose=False, max_chars=50, max_depth=64)
    assert "over max_chars=50" in too_long.reason
    monkeypatch.undo()
    assert score(deep, {"type": "array"}, max_depth=70).reward == 1.0
    assert score(deep, {"type": "array"}).reward == 0.0
    assert nesting_depth('{"a": "[[[[", "b": [[{}]]}') == 4


def test_scans_are_linear_on_pathological_text():
    # Quadratic scanning would take hours on these; a linear pass takes well under a second each.
    n = 100_000
    texts = ["{" * n, "[" * n + "}", '{"' * n, "```" * n, '{"a": "' + "\\" * n, "{}" * n, "x {" * n + GOOD]
    start = time.perf_counter()
    for text in texts:
        assert score(text, allow_prose=True, max_chars=10 * n).reward == 0.0
    assert time.perf_counter() - start < 20


def test_catastrophic_pattern_times_out_as_an_error_row():
    schema = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}}}
    start = time.perf_counter()
    result = score('{"name": "' + "a" * 40 + '!"}', schema, timeout=0.2)
    assert time.perf_counter() - start < 10  # a hang guard: unstopped, the backtracking takes hours
    assert result.reward == 0.0 and result.error.startswith("timeout")
    assert result.details["extracted"].startswith('{"name"')


# -------------------------------------------------------------------------------------------------- validation
def test_errors_say_which_path_failed():
    completion = '{"customer": "Ada", "items": [{"name": "a", "price": 1}, {"name": "b", "price": 2}, {"name": "c", "price": -1}]}'
    result = score(completion)
    assert result.reward == 0.0 and result.details["valid"] is False
    first = result.details["errors"][0]
    assert first["path"] == "$.items[2].price" and first["validator"] == "minimum"
    assert first["schema_path"] == "#/properties/items/items/properties/price/minimum"
    assert result.details["reason"] == "invalid at $.items[2].price: -1 is less than the minimum of 0"


def test_errors_are_bounded_and_best_first():
    items = ", ".join(f'{{"name": {i}, "price": -1}}' for i in range(50))
    result = score(f'{{"customer": 7, "items": [{items}]}}', max_errors=3)
    assert len(result.details["errors"]) == 3
    assert result.details["errors"][0]["path"] == "$.customer"


def test_paths_quote_keys_that_are_not_identifiers():
    schema = {
        "type": "object",
        "properties": {"a b": {"type": "object", "properties": {"x.y": {"type": "integer"}}}},
    }
    result = score('{"a b": {"x.y": "no"}}', schema)
    assert result.details["errors"][0]["path"] == '$["a b"]["x.y"]'


def test_draft_comes_from_dollar_schema():
    tuple_schema = {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "integer"}]}
    assert score("[1, 2]", tuple_schema).details["draft"] == "7"
    assert score("[1, 2]", tuple_schema).reward == 1.0
    assert score('["x"]', tuple_schema).reward == 0.0
    # the same schema without $schema is a 2020-12 schema, where "items" must be a schema
    bare = {"items": [{"type": "integer"}]}
    assert score("[1]", bare).error.startswith("invalid schema: ")
    assert score("[1]", bare, default_draft="7").reward == 1.0
    prefix = {"$schema": "https://json-schema.org/draft/2020-12/schema", "prefixItems": [{"type": "integer"}]}
    assert score('["x"]', prefix).reward == 0.0 and score('["x"]', prefix).details["draft"] == "2020-12"


def test_format_is_asserted_by_default():
    schema = {"type": "object", "properties": {"day": {"type": "string", "format": "date"}}}
    assert score('{"day": "2024-02-30"}', schema).reward == 0.0
    assert score('{"day": "2024-02-29"}', schema).reward == 1.0
    assert score('{"day": "2024-02-30"}', schema, format_check=False).reward == 1.0


def test_partial_credit_counts_required_keys():
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"$ref": "#/$defs/pos"}},
        "required": ["a", "b", "c"],
        "additionalProperties": False,
        "$defs": {"pos": {"type": "integer", "minimum": 1}},
    }
    partial = {"mode": "partial"}
    assert score('{"a": 1, "b": "x", "c": 2}', schema, **partial).reward == 1.0
    result = score('{"a": 1, "b": 2, "c": 0}', schema, **partial)
    assert result.reward == pytest.approx(1 / 4)
    assert (result.details["required_valid"], result.details["required_total"]) == (1, 3)
    assert score('{"a": 1, "b": "x", "c": 2, "d": 0}', schema, **partial).reward == pytest.approx(3 / 4)
    assert score('{"a": 1, "b": 2, "c": 0}', schema).reward == 0.0
    assert score("[1]", {"type": "object"}, **partial).reward == 0.0


# -------------------------------------------------------------------------------------------------- error rows
@pytest.mark.parametrize(
    ("reference", "error"),
    [
        (None, "invalid reference: the reference must be"),
        ({"type": "object"}, "invalid reference: the reference must be"),
        ({"schema": {}, "allowProse": True}, "invalid reference: unknown reference key(s) ['allowProse']"),
        ({"schema": {}, "allow_prose": "yes"}, "invalid reference: allow_prose must be true or false"),
        ("{not json", "invalid reference: the reference is not JSON"),
        ({"schema": "{bad"}, "invalid reference: the schema text is not JSON"),
        ({"schema": {"type": "bogus"}}, "invalid schema: "),
        ({"schema": {"minimum": "3"}}, "invalid schema: "),
        ({"schema": 5}, "invalid schema: a schema is an object or a boolean"),
        ({"schema": {"$schema": "https://example.com/mine"}}, "invalid schema: unknown $schema"),
        ({"schema": {"$schema": 7}}, "invalid schema: $schema must be a string"),
        ({"schema": {"$ref": "https://example.com/remote.json"}}, "invalid schema: unresolvable $ref"),
        ({"schema": {"properties": {"a": {"$ref": "#/$defs/missing"}}}}, "invalid schema: unresolvable $ref"),
    ],
)
def test_bad_references_and_schemas_are_error_rows(reference, error):
    result = get_verifier("json").score(Record(completion='{"a": 1}', reference=reference))
    assert result.reward == 0.0 and result.error.startswith(error), result.error
    assert "\n" not in result.error


def test_remote_refs_are_never_fetched(monkeypatch):
    import urllib.request

    def no_network(*args, **kwargs):
        raise AssertionError("network")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    result = score('{"a": 1}', {"$ref": "https://json-schema.org/some/remote.json"})
    assert result.error.startswith("invalid schema: unresolvable $ref")
    # the draft meta-schemas resolve offline, and local schemas are served from the setting
    assert score("{}", {"$ref": "https://json-schema.org/draft/2020-12/schema"}).reward == 1.0
    local = {"https://example.com/name.json": {"type": "string", "minLength": 2}}
    schema = {"properties": {"name": {"$ref": "https://example.com/name.json"}}}
    assert score('{"name": "Ada"}', schema, schemas=local).reward == 1.0
    assert score('{"name": "A"}', schema, schemas=local).reward == 0.0


def test_schemas_are_checked_once_per_distinct_schema(monkeypatch):
    verifier = JSONVerifier()
    calls = []
    original = verifier.schemas._compile
    monkeypatch.setattr(verifier.schemas, "_compile", lambda schema: calls.append(1) or original(schema))
    for completion in ('{"name": "x"}', '{"name": 1}', "[]"):
        verifier.score(Record(completion=completion, reference={"schema": dict(PERSON)}))
        verifier.score(Record(completion=completion, reference={"schema": {"type": "bogus"}}))
    assert len(calls) == 2


# -------------------------------------------------------------------------------------------------- settings
@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"mode": "lenient"}, "mode must be one of strict, partial"),
        ({"default_draft": "2021"}, "default_draft must be one of 2020-12, 2019-09, 7, 6, 4, 3"),
        ({"max_depth": 0}, "max_depth must be between 1 and 512"),
        ({"max_chars": -1}, "max_chars must be a positive integer"),
        ({"timeout": 0}, "timeout must be a positive number"),
        ({"allow_prose": "yes"}, "allow_prose must be true or false"),
        ({"schemas": {1: {}}}, "schemas must map URIs"),
        ({"allowprose": True}, "unknown json verifier option(s) ['allowprose']"),
    ],
)
def test_bad_settings_raise(settings, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        get_verifier("json", **settings)


def test_default_draft_accepts_a_number():
    assert get_verifier("json", default_draft=7).settings.default_draft == "7"


def test_pickles_and_keeps_its_settings():
    verifier = get_verifier("json", allow_prose=True, mode="partial", schemas={"urn:x": {"type": "string"}})
    verifier.score(Record(completion=GOOD, reference={"schema": ORDER}))  # a warm cache is not pickled
    clone = pickle.loads(pickle.dumps(verifier))
    assert clone.settings == verifier.settings
    assert clone.score(Record(completion=f"Order: {GOOD}", reference={"schema": ORDER})).reward == 1.0


def test_the_package_imports_the_standard_json_module():
    import json as stdlib_json

    assert extract_module.json is stdlib_json
    assert parse_json('{"a": [1, 2.5, "x"]}', 8) == {"a": [1, 2.5, "x"]}
    with pytest.raises(JSONTextError, match="duplicate key"):
        parse_json('{"a": 1, "a": 1}', 8)
