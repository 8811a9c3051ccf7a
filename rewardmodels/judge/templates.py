"""Judge prompt templates.

Placeholders are ``{prompt}``, ``{response}``, ``{reference}`` (pointwise), ``{prompt}``,
``{response_a}``, ``{response_b}``, ``{reference}`` (pairwise), and ``{criterion}`` / ``{rubric}`` (the rubric
templates of :mod:`rewardlab.rewardmodels.judge.sources`). Only these names are substituted, so a
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

# Rubrics as rewards (RaR; Gunjal et al., 2025). The per-criterion prompts keep one layout, question, response,
# criterion, then the instruction, which scripted judges (the demos') parse; the request holds nothing of the
# row but these three, so a criterion repeated across rows or samples is one cached request.
RUBRIC_CRITERION = (
    "[Question]\n{prompt}\n\n[Response]\n{response}\n\n[Criterion]\n{criterion}\n\n"
    "Does the response meet the criterion above? Judge only this criterion, as written; when it has several "
    "parts, all must hold (examples after 'such as' or 'for example' need not all appear). Explain briefly, "
    'then end with "Verdict: yes" if the response meets the criterion or "Verdict: no" if it does not.'
)

RUBRIC_PITFALL = (
    "[Question]\n{prompt}\n\n[Response]\n{response}\n\n[Criterion]\n{criterion}\n\n"
    "The criterion above describes a pitfall: a mistake or an omission a good response avoids. Does the "
    'response make this mistake? Judge only this pitfall. Explain briefly, then end with "Verdict: yes" if '
    'the response makes the mistake or "Verdict: no" if it avoids it.'
)

# RaR-Implicit's judge (the paper's appendix: rate the response 1-10 on how well it satisfies the rubrics,
# holistically), with the verdict in the format the score parser reads.
RUBRIC_IMPLICIT = (
    "[Question]\n{prompt}\n\n[Response]\n{response}\n\n[Rubric]\n{rubric}\n\n"
    "Rate the overall quality of the response on a scale of 1 to 10 based on how well it satisfies the "
    "rubric. Consider all criteria holistically: a response that violates several criteria or makes a listed "
    "mistake gets a lower score, one that satisfies them all a higher score. Explain briefly, then end with "
    '"Score: N/10".'
)

# A generative verifier against a reference answer (GenRM; Zhang et al., 2024, "Generative Verifiers: Reward
# Modeling as Next-Token Prediction": verify step by step, then "Is the answer correct?"; reward = P(yes)).
GENRM_VERIFY = (
    "You are verifying a response against a reference answer.\n\n[Question]\n{prompt}\n\n"
    "[Reference Answer]\n{reference}\n\n[Response]\n{response}\n\n"
    "Let's verify step by step whether the response's final answer agrees with the reference answer (the "
    "same value or statement, possibly written differently). Is the answer correct? Explain briefly, then end "
    'with "Verdict: yes" if it is correct or "Verdict: no" if it is not.'
)

REFERENCE_BLOCK = (
    " A reference answer is given; use it to judge correctness.\n\n[Reference Answer]\n{reference}\n"
)

TEMPLATES = {
    "score": POINTWISE_SCORE,
    "binary": POINTWISE_BINARY,
    "pairwise": PAIRWISE,
    "math_equivalence": MATH_EQUIVALENCE,
    "rubric_criterion": RUBRIC_CRITERION,
    "rubric_pitfall": RUBRIC_PITFALL,
    "rubric_implicit": RUBRIC_IMPLICIT,
    "genrm_verify": GENRM_VERIFY,
}

_PLACEHOLDER = re.compile(
    r"\{(prompt|response|reference|response_a|response_b|reference_block|criterion|rubric)\}"
)


def get_template(name_or_text: str | None, mode: str) -> str:
    """A built-in template by name (a key of :data:`TEMPLATES`: ``score``, ``binary``, ``pairwise``,
    ``math_equivalence``, ``rubric_criterion``, ``rubric_pitfall``, ``rubric_implicit``, ``genrm_verify``), a template
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
    "GENRM_VERIFY",
    "MATH_EQUIVALENCE",
    "PAIRWISE",
    "POINTWISE_BINARY",
    "POINTWISE_SCORE",
    "RUBRIC_CRITERION",
    "RUBRIC_IMPLICIT",
    "RUBRIC_PITFALL",
    "TEMPLATES",
    "get_template",
    "render",
]
