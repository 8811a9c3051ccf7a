"""Structured-output rewards: a completion's JSON value validated against the record's JSON Schema.

from rewardlab.verifiers.json import JSONVerifier

verifier = JSONVerifier()
schema = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
verifier.score(Record(completion='{"name": "Ada"}', reference={"schema": schema})).reward  # 1.0
"""

from rewardlab.verifiers.json.extract import Extraction, extract_json, parse_json
from rewardlab.verifiers.json.schema import DRAFTS
from rewardlab.verifiers.json.verifier import MODES, JSONConfig, JSONVerifier, read_reference

__all__ = [
    "DRAFTS",
    "MODES",
    "Extraction",
    "JSONConfig",
    "JSONVerifier",
    "extract_json",
    "parse_json",
    "read_reference",
]
