"""Judge prompt templates.

Placeholders are ``{prompt}``, ``{response}``, ``{reference}`` (pointwise) and ``{prompt}``,
``{response_a}``, ``{response_b}``, ``{reference}`` (pairwise). Only these names are substituted, so a
template may contain other braces (``\\boxed{}``) freely. The built-in templates follow the shape of
MT-Bench's single-answer and pairwise grading prompts (Zheng et al., 2023): reason first, then a verdict
in a fixed format that :mod:`rewardlab.rewardmodels.judge.parse` reads.
"""

from __future__ import annotations

import re
from pathlib import Path

POINTWISE_SCORE = (
    "Please act as an impartial judge and evaluate the quality of the response provided by an AI assistant "
    "to the user question below. Consider helpfulness, relevance, accuracy, depth and level of detail.{reference_block}"
    " Begin your evaluation with a short explanation. Be as objective as possible. After the explanation, "
    'rate the response on a scale of 1 to 10 by strictly following this format: "Score: N/10".\n\n'
    "[Question]\n{prompt}\n\n[The Start of the Response]\n{response}\n[The End of the Response]"
)

POINTWISE_BINARY = (
    "Please act as an impartial judge and decide whether the response below correctly answers the user "
    "question.{reference_block} Begin with a short explanation. After the explanation, give your verdict "
    'by strictly following this format: "Verdict: yes" if the response is correct, "Verdict: no" if not.\n\n'
    "[Question]\n{prompt}\n\n[The Start of the Response]\n{response}\n[The End of the Response]"
)

PAIRWISE = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI "
    "assistants to the user question below. Choose the assistant that follows the user's instructions and "
    "answers the question better.{reference_block} Begin your evaluation by comparing the two responses and "
    "provide a short explanation. Avoid any position bias: the order in which the responses are presented "
    "must not influence your decision, nor must their length. After the explanation, output your final "
    'verdict by strictly following this format: "Verdict: A" if assistant A is better, "Verdict: B" if '
    "assistant B is better.\n\n[Question]\n{prompt}\n\n[The Start of Assistant A's Answer]\n{response_a}\n"
    "[The End of Assistant A's Answer]\n\n[The Start of Assistant B's Answer]\n{response_b}\n"
    "[The End of Assistant B's Answer]"
)

MATH_EQUIVALENCE = (
    "You are checking a math solution. Decide whether the final answer of the response is mathematically "
    "equivalent to the reference answer (the same value, possibly written differently: 1/2 and 0.5, "
    "\\frac{\\sqrt{3}}{2} and sqrt(3)/2, x=3 and 3). Ignore the reasoning; judge only the final answer. "
    'Explain briefly, then answer by strictly following this format: "Verdict: yes" or "Verdict: no".\n\n'
    "[Question]\n{prompt}\n\n[Reference Answer]\n{reference}\n\n[The Start of the Response]\n{response}\n"
    "[The End of the Response]"
)

REFERENCE_BLOCK = (
    " A reference answer is given; use it to judge correctness.\n\n[Reference Answer]\n{reference}\n"
)

TEMPLATES = {
    "score": POINTWISE_SCORE,
    "binary": POINTWISE_BINARY,
    "pairwise": PAIRWISE,
    "math_equivalence": MATH_EQUIVALENCE,
}

_PLACEHOLDER = re.compile(r"\{(prompt|response|reference|response_a|response_b|reference_block)\}")


def get_template(name_or_text: str | None, mode: str) -> str:
    """A built-in template by name (``score``, ``binary``, ``pairwise``, ``math_equivalence``), a template
    file's text when ``name_or_text`` is an existing path, the text itself otherwise, or the default of
    ``mode`` when ``None``."""
    if name_or_text is None:
        return TEMPLATES[mode]
    if name_or_text in TEMPLATES:
        return TEMPLATES[name_or_text]
    if "\n" not in name_or_text and len(name_or_text) < 4096:
        path = Path(name_or_text)
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return name_or_text


def render(template: str, **values: str | None) -> str:
    """Fills the placeholders of ``template``; ``{reference_block}`` becomes the reference section when a
    reference is given and nothing otherwise. Values are inserted verbatim (their braces are left alone)."""
    reference = values.get("reference")
    block = REFERENCE_BLOCK.replace("{reference}", str(reference)) if reference not in (None, "") else ""
    table = {k: "" if v is None else str(v) for k, v in values.items()}
    table["reference_block"] = block
    return _PLACEHOLDER.sub(lambda m: table.get(m.group(1), ""), template)


__all__ = [
    "MATH_EQUIVALENCE",
    "PAIRWISE",
    "POINTWISE_BINARY",
    "POINTWISE_SCORE",
    "TEMPLATES",
    "get_template",
    "render",
]
