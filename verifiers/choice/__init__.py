"""The ``choice`` verifier: multiple-choice answers (a letter A-J, or an option's text) against the gold letter."""

from rewardlab.verifiers.choice.options import Choices, normalize_text, parse_choices
from rewardlab.verifiers.choice.reading import Statement, read_statements
from rewardlab.verifiers.choice.verifier import ChoiceConfig, ChoiceVerifier

__all__ = [
    "ChoiceConfig",
    "ChoiceVerifier",
    "Choices",
    "Statement",
    "normalize_text",
    "parse_choices",
    "read_statements",
]
