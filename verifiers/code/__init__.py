"""Code execution verifier and its sandbox (``get_verifier("code")``); see ``docs/code.md``."""

from rewardlab.verifiers.code.sandbox import (
    FunctionTask,
    RunReport,
    Sandbox,
    SandboxConfig,
    SandboxLimits,
    StdioTask,
)
from rewardlab.verifiers.code.verifier import (
    CodeConfig,
    CodeVerifier,
    TestSpec,
    extract_code,
    normalize_reference,
    outputs_match,
    prompt_helpers,
)

__all__ = [
    "CodeConfig",
    "CodeVerifier",
    "FunctionTask",
    "RunReport",
    "Sandbox",
    "SandboxConfig",
    "SandboxLimits",
    "StdioTask",
    "TestSpec",
    "extract_code",
    "normalize_reference",
    "outputs_match",
    "prompt_helpers",
]
