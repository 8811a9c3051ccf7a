"""IFEval instruction-following verifier: Google's 25 instruction types, strict and loose.

from rewardlab.verifiers import get_verifier
ifeval = get_verifier("ifeval")                      # reward = fraction of instructions followed
result = ifeval.score(Record(prompt=..., completion=..., reference={
    "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}))
ifeval_summary([result, ...])                        # IFEval's prompt/instruction-level accuracies
"""

from __future__ import annotations

from rewardlab.verifiers.ifeval.instructions import (
    INSTRUCTION_IDS,
    INSTRUCTIONS,
    Instruction,
    InstructionArgumentError,
    Verdict,
    build_instruction,
    register_instruction,
)
from rewardlab.verifiers.ifeval.summary import IFEvalTally, ifeval_summary
from rewardlab.verifiers.ifeval.verifier import IFEvalConfig, IFEvalVerifier, check_response, instruction_spec

__all__ = [
    "INSTRUCTIONS",
    "INSTRUCTION_IDS",
    "IFEvalConfig",
    "IFEvalTally",
    "IFEvalVerifier",
    "Instruction",
    "InstructionArgumentError",
    "Verdict",
    "build_instruction",
    "check_response",
    "ifeval_summary",
    "instruction_spec",
    "register_instruction",
]
