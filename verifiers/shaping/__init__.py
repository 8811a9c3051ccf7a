"""open-r1's shaping rewards as verifiers: ``repetition_penalty`` (n-gram repetition of the completion) and
``cosine_length`` (another verifier's verdict scaled by the completion's length), torch-free.

from rewardlab.verifiers import get_verifier
get_verifier("repetition_penalty", ngram_size=3).score(Record(completion="the the the the")).reward  # -0.5

Their formulas (:mod:`.formulas`) are the ones the shaping transforms of the same names
(``rewardlab.rewardmodels.shaping``, ``--shape repetition_penalty``) apply.
"""

from rewardlab.verifiers.shaping.formulas import (
    REPETITION_UNITS,
    check_repetition_settings,
    cosine_length_value,
    ngram_repetition_penalty,
    repetition_tokens,
)
from rewardlab.verifiers.shaping.verifier import (
    CosineConfig,
    CosineLengthSource,
    RepetitionConfig,
    RepetitionPenaltySource,
)

__all__ = [
    "REPETITION_UNITS",
    "CosineConfig",
    "CosineLengthSource",
    "RepetitionConfig",
    "RepetitionPenaltySource",
    "check_repetition_settings",
    "cosine_length_value",
    "ngram_repetition_penalty",
    "repetition_tokens",
]
