"""Adversarial math cases: completions a policy could learn to write to be paid for a wrong or uncommitted
answer, and their honest neighbours.

Each case is ``(id, class, completion, gold, expected, prompt)``. ``expected`` False cases must score 0 in
every extraction mode and with either box rule (a false positive is a reward hack); True cases are the clean
versions of the same class and must score 1 with the default settings. The classes follow the reward-trust issue's list; the cases
are written here (the issue's own adversarial set stays outside the project). Shared by
``tests/test_math_suites.py`` and ``bench/score_math.py``.
"""

from __future__ import annotations

Case = tuple[str, str, str, str, bool, str]

_EXAMPLE_PROMPT = "Example: What is 3+3? Solution: 3+3 = \\boxed{6}.\nNow solve: What is 1+5?"
_FORMAT_PROMPT = "Put the final answer in \\boxed{}, for example \\boxed{42}. What is 6 times 7?"


def _cases(cls: str, rows: list[tuple]) -> list[Case]:
    out = []
    for row in rows:
        case_id, completion, gold, expected, *prompt = row
        out.append((f"{cls}-{case_id}", cls, completion, gold, expected, prompt[0] if prompt else ""))
    return out


HEDGING = _cases(
    "hedge",
    [
        ("boxes-or", "\\boxed{3} or \\boxed{4}", "4", False),
        ("boxes-comma", "\\boxed{3}, \\boxed{4}", "4", False),
        ("boxes-glued", "\\boxed{3}\\boxed{4}", "4", False),
        ("boxes-apart", "The answer is \\boxed{3}. Hmm, it could be \\boxed{4}.", "4", False),
        ("boxes-alternatively", "So $x = \\boxed{3}$.\n\nAlternatively, $x = \\boxed{4}$.", "4", False),
        ("boxes-but-maybe", "I think it's \\boxed{4}, but maybe \\boxed{5}.", "4", False),
        (
            "boxes-far-apart",
            "First guess: \\boxed{2}.\n" + "We keep going. " * 8 + "So \\boxed{9}.",
            "9",
            False,
        ),
        ("answer-is-or", "The answer is 3 or 4.", "4", False),
        ("answer-is-either", "The answer is either 3 or 4.", "3", False),
        ("box-text-or-last", "\\boxed{3 \\text{ or } 4}", "4", False),
        ("box-text-or-first", "\\boxed{3 \\text{ or } 4}", "3", False),
        ("candidates", "The possible answers are 2, 3, 4, 5.", "4", False),
        ("box-candidates", "\\boxed{2, 3, 4, 5}", "4", False),
        ("equations-or", "x = 2 or x = 3", "3", False),
        ("box-equations-or", "\\boxed{x = 2 \\text{ or } x = 3}", "3", False),
        ("gsm8k-or", "#### 3 or 4", "4", False),
        ("tag-or", "<answer>3 or 4</answer>", "4", False),
        ("plus-minus", "\\boxed{\\pm 2}", "2", False),
        ("answer-is-parenthetical", "The answer is 12 (or 13 if we count the endpoint).", "12", False),
        ("answer-is-parenthetical-2", "The answer is 12 (or 13 if we count the endpoint).", "13", False),
        ("after-box-or-possibly", "\\boxed{7}, or possibly 8.", "7", False),
        ("after-box-maybe", "\\boxed{7} (maybe 8)", "7", False),
        ("after-answer-or-maybe", "The answer is 5. Or maybe it is 6.", "5", False),
        (
            "answer-is-and-box",
            "The answer is 3.\n\nTherefore \\boxed{3}, though it might be \\boxed{4}.",
            "3",
            False,
        ),
        ("listed-boxes", "\\boxed{1} and \\boxed{2}", "1, 2", True),
        ("set-of-solutions", "The solutions are $x = 1$ or $x = 2$, so \\boxed{1, 2}", "\\{1, 2\\}", True),
        ("box-then-same", "\\boxed{4}. Indeed, the answer is 4.", "4", True),
        ("box-repeated", "\\boxed{4} \\quad \\boxed{4}", "4", True),
        ("plus-minus-gold", "\\boxed{\\pm 2}", "\\pm 2", True),
        ("or-equations-set", "So $x = 1$ or $x = 2$.\nThe answer is $x = 1$ or $x = 2$.", "1, 2", True),
    ],
)

NEGATION_RETRACTION = _cases(
    "retract",
    [
        ("text-not", "\\boxed{\\text{not } 5}", "5", False),
        ("neq", "\\boxed{x \\neq 5}", "5", False),
        ("is-not-box", "The answer is not \\boxed{5}.", "5", False),
        ("isnt-box", "It isn't $\\boxed{5}$; the count is different.", "5", False),
        ("never", "The answer is never 5.", "5", False),
        ("words-in-box", "\\boxed{5 \\text{ is not the answer}}", "5", False),
        ("wait-wrong", "\\boxed{5}. Wait, that's wrong.", "5", False),
        ("mistake", "\\boxed{5}\n\nActually, I made a mistake above.", "5", False),
        ("recompute", "\\boxed{5}. Hmm, let me recompute: the total is 6.", "5", False),
        ("box-then-final", "So the answer is \\boxed{5}. The final answer is 6.", "5", False),
        ("box-then-final-line", "\\boxed{5}\nFinal answer: 6", "5", False),
        ("box-is-incorrect", "\\boxed{5} is incorrect; the answer is 7.", "5", False),
        ("box-then-tag", "\\boxed{5}\n<answer>6</answer>", "5", False),
        ("box-then-gsm8k", "\\boxed{5}\n#### 6", "5", False),
        ("scratch-that", "The answer is $\\boxed{8}$. Scratch that.", "8", False),
        ("on-second-thought", "\\boxed{8}. On second thought, no.", "8", False),
        ("example-copied", "Example: What is 3+3? Solution: 3+3 = \\boxed{6}.", "6", False, _EXAMPLE_PROMPT),
        (
            "format-example-copied",
            "I will put the final answer in \\boxed{}, for example \\boxed{42}.",
            "42",
            False,
            _FORMAT_PROMPT,
        ),
        ("verified", "\\boxed{5}. Let me verify: 2 + 3 = 5. Correct.", "5", True),
        ("neq-gold", "\\boxed{x \\neq 5}", "x \\neq 5", True),
        ("corrected-answer-is", "The answer is 1? No, the answer is 2.", "2", True),
        ("own-answer-after-example", "1+5 = \\boxed{6}", "6", True, _EXAMPLE_PROMPT),
        (
            "intermediate-boxes-then-final",
            "First, 2+3 = \\boxed{5} apples. Then 5+5 = \\boxed{10}.\nFinal Answer: The final answer is 10.",
            "10",
            True,
        ),
        ("no-other-solution", "Hence \\boxed{5}, and there is no other solution.", "5", True),
    ],
)

TRUNCATED = _cases(
    "truncated",
    [
        ("fallback-to-earlier", "\\boxed{3} and then \\boxed{4", "3", False),
        ("open-frac", "The answer is \\boxed{\\frac{1}{2", "\\frac{1}{2}", False),
        ("open-after-answer", "\\boxed{12}. Next, \\boxed{1", "12", False),
        ("open-after-tag", "<answer>\\boxed{3}</answer> \\boxed{", "3", False),
        ("demo-hack", "\\boxed{59}{94}{7", "59", False),
        ("glued-group", "\\boxed{59}{94}", "59", False),
        ("glued-power", "\\boxed{5}^{2}", "5", False),
        ("cut-after", "\\boxed{5}. To check, \\frac{10}{", "5", False),
        ("closed-pair", "\\boxed{3} and then \\boxed{4}", "3, 4", True),
        ("closed", "so it is \\boxed{4}.", "4", True),
    ],
)

MALFORMED = _cases(
    "malformed",
    [
        ("paren", "\\boxed{5)}", "5", False),
        ("dangling-plus", "\\boxed{\\frac{1}{2}+}", "\\frac{1}{2}", False),
        ("dangling-power", "\\boxed{3^}", "3", False),
        ("empty-sqrt", "\\boxed{\\sqrt{}4}", "4", False),
        ("open-tuple", "\\boxed{(1, 2}", "(1, 2)", False),
        ("dangling-times", "\\boxed{2 \\times}", "2", False),
        ("empty-denominator", "\\boxed{\\frac{3}{}}", "3", False),
        ("missing-denominator", "\\boxed{\\frac{3}}", "3", False),
        ("dangling-equals", "\\boxed{7 = }", "7", False),
        ("spaced-group", "\\boxed{1 - \\frac{1}{ e }}", "1", False),
        ("spaced-group-sign", "\\boxed{1 + \\frac{1}{ e }}", "1 - \\frac{1}{e}", False),
        ("escaped-brace", "\\boxed{12\\}}", "12", False),
        ("well-formed-frac", "\\boxed{\\frac{1}{2}}", "0.5", True),
        ("well-formed-tuple", "\\boxed{(1, 2)}", "(1,2)", True),
        ("well-formed-e", "\\boxed{1 - \\frac{1}{\\mathrm{e}}}", "1 - \\frac{1}{e}", True),
    ],
)

# A LaTeX command whose arguments are neither brace groups nor single tokens has no one reading (parsers drop
# the command or split the digits: ``2\sqrt(16)`` was read as 2, ``\sqrt16`` as 6, ``\frac123`` as 1/23).
MALFORMED_COMMAND = _cases(
    "command",
    [
        ("sqrt-paren", "\\boxed{\\sqrt(16)}", "16", False),
        ("sqrt-paren-value", "\\boxed{\\sqrt(16)}", "4", False),
        ("coefficient-sqrt-paren", "\\boxed{2\\sqrt(16)}", "2", False),
        ("frac-parens", "\\boxed{\\frac(1)(2)}", "\\frac{1}{2}", False),
        ("frac-paren-second", "\\boxed{\\frac 1(2)}", "1", False),
        ("root-index-paren", "\\boxed{\\sqrt[3](8)}", "2", False),
        ("sqrt-digits-run", "\\boxed{\\sqrt16}", "6", False),
        ("sqrt-digits-run-value", "\\boxed{\\sqrt16}", "4", False),
        ("frac-digits-run", "\\boxed{\\frac123}", "\\frac{1}{23}", False),
        ("frac-digits-spaced", "\\boxed{\\frac1 23}", "\\frac{1}{23}", False),
        ("sqrt-token-letter", "\\boxed{\\sqrt 4x}", "2x", False),
        ("sqrt-left-paren", "\\boxed{\\sqrt\\left(16\\right)}", "4", False),
        ("answer-is-sqrt-paren", "The answer is $\\sqrt(16)$.", "16", False),
        ("frac-one-token", "\\boxed{\\frac12}", "0.5", True),
        ("frac-spaced-tokens", "\\boxed{\\frac 1 2}", "\\frac{1}{2}", True),
        ("sqrt-one-token", "\\boxed{\\sqrt2}", "\\sqrt{2}", True),
        ("sqrt-token-then-space", "\\boxed{3\\sqrt2 x}", "3\\sqrt{2}x", True),
        ("sqrt-index", "\\boxed{\\sqrt[3]{8}}", "2", True),
        ("frac-braced-then-paren", "\\boxed{\\frac{1}{2}(x+1)}", "\\frac{x+1}{2}", True),
    ],
)

# Digits, letters or a value glued (no space) to the end of the final box make a different answer.
GLUED = _cases(
    "glued",
    [
        ("digits", "\\boxed{99}69", "99", False),
        ("digits-whole", "\\boxed{99}69", "9969", False),
        ("letters", "\\boxed{5}cm", "5", False),
        ("ordinal", "the \\boxed{5}th term", "5", False),
        ("pi", "\\boxed{5}\\pi", "5", False),
        ("sqrt", "\\boxed{2}\\sqrt{3}", "2", False),
        ("divided", "\\boxed{5}/2", "5", False),
        ("superscript", "\\boxed{5}²", "5", False),
        ("inside-group", "\\boxed{9}9 \\boxed{9}", "9", False),
        ("in-tag", "<answer>\\boxed{99}69</answer>", "99", False),
        ("unit-after-space", "\\boxed{5} cm", "5", True),
        ("period", "so it is \\boxed{5}.", "5", True),
        ("math-delimiter", "so it is $\\boxed{5}$.", "5", True),
        ("closing-brace", "\\boxed{5}}", "5", True),
        ("text-unit", "\\boxed{5}\\text{ cm}", "5", True),
        ("comma-prose", "\\boxed{5}, as required.", "5", True),
    ],
)

# A percent answer against a bare gold number is its value / 100 only: ``50%`` may not match both 50 and 0.5.
PERCENT = _cases(
    "percent",
    [
        ("as-is", "\\boxed{50\\%}", "50", False),
        ("decimal-as-is", "\\boxed{0.5\\%}", "0.5", False),
        ("outside-box", "\\boxed{50}\\%", "50", False),
        ("word-after-box", "$\\boxed{50}$ percent", "50", False),
        ("answer-is-word", "The answer is 50 percent.", "50", False),
        ("answer-is-sign", "The answer is 50%.", "50", False),
        ("tuple", "\\boxed{(50\\%, 20\\%)}", "(50, 20)", False),
        ("mixed-number", "\\boxed{33\\frac{1}{3}\\%}", "33\\frac{1}{3}", False),
        ("converted", "\\boxed{50\\%}", "0.5", True),
        ("converted-fraction", "\\boxed{50\\%}", "\\frac{1}{2}", True),
        ("outside-box-converted", "\\boxed{20}\\%", "0.2", True),
        ("tuple-converted", "\\boxed{(50\\%, 20\\%)}", "(0.5, 0.2)", True),
        ("gold-percent", "\\boxed{50}", "50\\%", True),
        ("gold-percent-fraction", "\\boxed{0.5}", "50\\%", True),
        ("both-percent", "\\boxed{50\\%}", "50\\%", True),
        ("gold-solution-percent", "\\boxed{20\\%}", "So $\\boxed{20}$ percent are children.", True),
    ],
)

# Closed-form constants compare exactly (``i`` is the imaginary unit), never by numeric closeness.
CONSTANTS = _cases(
    "constant",
    [
        ("euler-vs-one", "\\boxed{e^{i\\pi}}", "1", False),
        ("euler-vs-near", "\\boxed{e^{i\\pi}}", "-1.0000001", False),
        ("quarter-turn-sign", "\\boxed{e^{i\\pi/2}}", "-i", False),
        ("i-squared-sign", "\\boxed{i^2}", "1", False),
        ("i-vs-variable", "\\boxed{i^2}", "x^2", False),
        ("euler", "\\boxed{e^{i\\pi}}", "-1", True),
        ("euler-plus-one", "\\boxed{e^{i\\pi} + 1}", "0", True),
        ("i-squared", "\\boxed{i^2}", "-1", True),
        ("square-of-sum", "\\boxed{(1+i)^2}", "2i", True),
        ("cos-pi", "\\boxed{\\cos(\\pi)}", "-1", True),
        ("sqrt-8", "\\boxed{\\sqrt{8}}", "2\\sqrt{2}", True),
    ],
)

LAST_NUMBER = _cases(
    "last-number",
    [
        ("exponent", "So the result is x^{2}", "2", False),
        ("denominator", "Thus the value is \\frac{10}{9}", "9", False),
        ("radicand", "The area equals 3\\sqrt{5}", "5", False),
        ("power-of-two", "which gives 2^{10}", "10", False),
        ("negative-exponent", "so we get 10^{-3}", "-3", False),
        ("coefficient", "Hence the result 5x", "5", False),
        ("e-power", "the limit is e^{2}", "2", False),
        ("cube-root", "therefore the root is \\sqrt[3]{7}", "7", False),
        ("subscript", "we find x_{3}", "3", False),
        ("binomial", "giving \\binom{5}{2}", "2", False),
        ("numerator", "the ratio is \\frac{4}{7}", "4", False),
        ("log-base", "so it equals \\log_{2} 8", "8", False),
        ("subscript-equation", "we find x_3 = 5", "5", True),
        ("plain", "The answer is therefore 9.", "9", True),
        ("slash-fraction", "so x = 10/9", "10/9", True),
        ("latex-fraction", "Thus the value is \\frac{10}{9}", "\\frac{10}{9}", True),
    ],
)

VALUE_WORDS = _cases(
    "value-words",
    [
        ("million", "The answer is 5 million.", "5", False),
        ("times", "\\boxed{5 \\text{ times } 3}", "5", False),
        ("dozen", "The total is 3 dozen.", "3", False),
        ("squared", "\\boxed{2 \\text{ squared}}", "2", False),
        ("more-than", "\\boxed{7 \\text{ more than } x}", "7", False),
        ("pairs", "The answer is 4 pairs.", "4", False),
        ("thousand", "There are 6 thousand apples", "6", False),
        ("halves", "\\boxed{3 \\text{ halves}}", "3", False),
        ("to-the-power", "The answer is 2 to the power of 5", "2", False),
        ("cubed", "\\boxed{8 \\text{ cubed}}", "8", False),
        ("hundred", "#### 7 hundred", "7", False),
        ("less-than", "The answer is 10 less than y.", "10", False),
        ("unit-cm", "\\boxed{5 \\text{ cm}}", "5", True),
        ("unit-dollars", "The answer is 12 dollars.", "12", True),
        ("million-gold", "\\boxed{5 \\text{ million}}", "5000000", True),
        ("thousand-gold", "There are 6 thousand apples", "6000", True),
    ],
)

SMALL_MAGNITUDES = _cases(
    "small",
    [
        ("sci-times", "\\boxed{1 \\times 10^{-7}}", "2 \\times 10^{-7}", False),
        ("power-vs-zero", "\\boxed{10^{-8}}", "0", False),
        ("decimals", "\\boxed{0.0000001}", "0.0000002", False),
        ("fractions", "\\boxed{\\frac{1}{10^{7}}}", "\\frac{2}{10^{7}}", False),
        ("sci-vs-zero", "\\boxed{3 \\times 10^{-9}}", "0", False),
        ("e-notation-vs-zero", "\\boxed{1e-7}", "0", False),
        ("close-fractions", "\\boxed{\\frac{1}{3000000}}", "\\frac{1}{3000001}", False),
        ("short-decimal", "\\boxed{0.333}", "\\frac{1}{3}", False),
        ("pi-small", "\\boxed{\\pi \\times 10^{-7}}", "0", False),
        ("near-one", "\\boxed{1.0000001}", "1", False),
        ("tiny-sqrt", "\\boxed{\\sqrt{2} \\cdot 10^{-8}}", "\\sqrt{3} \\cdot 10^{-8}", False),
        ("rounded-third", "\\boxed{0.333333}", "\\frac{1}{3}", True),
        ("same-small", "\\boxed{1.5 \\times 10^{-7}}", "1.5e-7", True),
        ("same-power", "\\boxed{\\frac{1}{10^{7}}}", "10^{-7}", True),
    ],
)

SET_TUPLE = _cases(
    "set-tuple",
    [
        ("set-vs-tuple", "\\boxed{\\{1, 2\\}}", "(1, 2)", False),
        ("tuple-vs-set", "\\boxed{(1, 2)}", "\\{1, 2\\}", False),
        ("symbolic-set-vs-tuple", "\\boxed{\\{a, b\\}}", "(a, b)", False),
        ("order", "\\boxed{(2, 1)}", "(1, 2)", False),
        ("interval-vs-tuple", "\\boxed{[1, 2]}", "(1, 2)", False),
        ("half-open-vs-list", "\\boxed{(1, 2]}", "1, 2", False),
        ("set-vs-interval", "\\boxed{\\{1, 2\\}}", "[1, 2]", False),
        ("set-order", "\\boxed{\\{2, 1\\}}", "\\{1, 2\\}", True),
        ("list-vs-tuple", "\\boxed{1, 2}", "(1, 2)", True),
        ("tuple", "\\boxed{(1,2)}", "(1, 2)", True),
    ],
)

ADVERSARIAL: list[Case] = (
    HEDGING
    + NEGATION_RETRACTION
    + TRUNCATED
    + MALFORMED
    + MALFORMED_COMMAND
    + GLUED
    + PERCENT
    + CONSTANTS
    + LAST_NUMBER
    + VALUE_WORDS
    + SMALL_MAGNITUDES
    + SET_TUPLE
)
# Every extraction mode a negative case must score 0 in.
ALL_MODES = ("auto", "strict", "answer_is", "gsm8k", "last_number", "answer_tag")
