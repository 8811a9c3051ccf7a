"""Format rewards for R1-style RL: ``<think>``/``<answer>`` structure, regexes, "format and correct".

from rewardkit.verifiers.format import FormatVerifier, format_and_correct

FormatVerifier().score(Record(completion="<think>2+2</think><answer>4</answer>")).reward  # 1.0
both = format_and_correct("math")  # correctness counts only inside a well-formed answer block
"""

from rewardkit.verifiers.format.combine import COMBINE_MODES, CombinedVerifier, format_and_correct
from rewardkit.verifiers.format.verifier import FormatConfig, FormatVerifier, Parsed

__all__ = [
    "COMBINE_MODES",
    "CombinedVerifier",
    "FormatConfig",
    "FormatVerifier",
    "Parsed",
    "format_and_correct",
]
