"""Format rewards for R1-style RL: ``<think>``/``<answer>`` structure, regexes, "format and correct".

from rewardlab.verifiers.format import FormatVerifier, format_and_correct

FormatVerifier().score(Record(completion="<think>2+2</think><answer>4</answer>")).reward  # 1.0
both = format_and_correct("math")  # correctness counts only inside a well-formed answer block
"""

from rewardlab.verifiers.combine import COMBINE_MODES
from rewardlab.verifiers.format.verifier import (
    CombinedVerifier,
    FormatConfig,
    FormatVerifier,
    Parsed,
    format_and_correct,
)

__all__ = [
    "COMBINE_MODES",
    "CombinedVerifier",
    "FormatConfig",
    "FormatVerifier",
    "Parsed",
    "format_and_correct",
]
