"""The math verifier: read the final answer, refuse the ambiguous ones, normalise, compare with the gold.

Pipeline for one record:

1. **Read** the answer with the configured mode (:mod:`.answer`: the latest explicit answer, i.e. a box
   group, ``<answer>`` tag, ``#### N`` line or "the answer is ..."; in ``auto`` without one, the last math
   span or number; ``strict``: boxes only; ``boxes``: box groups or the last box alone). The gold answer is
   its last box group (or box) or ``####`` line when it is a full solution, else used whole; gold answers are
   cached per distinct reference.
2. **Refuse** what does not commit to one answer (docs/math.md, "Decision policy"): a cut-off box, a
   retraction or hedge, a negation, malformed or glued text, a LaTeX command without a single reading,
   value-changing words, different answers stated. It scores 0 with ``method="rejected"`` and the reason.
3. **Normalise** both (:mod:`.normalize`): wrappers, ``\\text{}``, units, degrees, currency, thousands
   separators, ``x = ...``.
4. **Compare**: two plain numbers exactly (fractions; decimals only as their rounding, or a relative
   tolerance), identical strings directly, numeric tuples/sets element-wise, everything else with
   ``math_verify.parse`` + ``math_verify.verify`` (sympy: expressions, intervals, sets, matrices, equations),
   refusing math-verify's parses of a malformed prefix and its rounding-only equalities of distinct values;
   then closed-form constants with ``i`` exactly (``e^{i\\pi}`` = ``-1``). A percent answer against a gold
   without one is compared as its value / 100 only.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import math_verify
import math_verify.grader
import math_verify.parser
import math_verify.utils
from math_verify.errors import TimeoutException

from rewardlab.runtime import in_scoring_worker
from rewardlab.types import Record, Result
from rewardlab.verifiers.base import Verifier
from rewardlab.verifiers.math.answer import Candidate, Reading, box_groups, read_answer
from rewardlab.verifiers.math.extract import BOX_RULES, extract_gsm8k, resolve_mode
from rewardlab.verifiers.math.normalize import (
    PERCENT_REFUSAL,
    NumericAnswer,
    compact,
    constants_equal,
    distinct_numbers,
    malformed,
    negated,
    normalize,
    numbers_equal,
    outer_kind,
    parse_number,
    parse_structure,
    percent_as_hundredths,
    structures_equal,
)

# math-verify warns once when its signal timeout is disabled; here the scoring engine owns the hard timeout
# (worker processes it kills), so the warning would only confuse.
math_verify.parser.TIMEOUT_WARNING_SHOWN = True
math_verify.grader.TIMEOUT_WARNING_SHOWN = True


@dataclass(frozen=True)
class MathConfig:
    """Settings of :class:`MathVerifier` (all keyword arguments of ``get_verifier("math", ...)``)."""

    mode: str | tuple[str, ...] = "auto"
    """Extraction mode for the completion: ``auto``, ``strict`` (= ``boxed``: last ``\\boxed{}`` only, for RL),
    ``answer_is``, ``gsm8k``, ``last_number``, ``answer_tag``, or a tuple of extractor names tried in order
    (``answer_tag``, ``boxed``, ``gsm8k``, ``answer_is``, ``last_math``, ``last_number``)."""
    gold_mode: str | tuple[str, ...] = "auto"
    """How to read the reference: ``auto`` takes the last ``\\boxed{}`` or the ``####`` line of a full
    solution, else the whole reference; any extraction mode name forces that extractor."""
    boxes: str = "group"
    """How boxes are read, in the completion and in the reference: ``group`` (math-verify's rule) reads boxes
    listed together (``\\boxed{1} and \\boxed{2}``) as one answer ``1, 2``; ``last`` (the rule of MATH's
    ``last_boxed_only_string``) reads the last box alone. Either way an earlier box with a different answer
    makes the completion ambiguous (docs/math.md, "Decision policy")."""
    float_rounding: int = 6
    """Decimals both sides are rounded to when either is written as a decimal (math-verify's default)."""
    numeric_precision: int = 15
    """Significant digits sympy evaluates to when comparing expressions numerically (math-verify's default)."""
    rel_tol: float | None = None
    """Relative tolerance for numeric answers instead of rounding (e.g. ``1e-2`` for 2-significant-digit
    physics answers); ``None`` uses ``float_rounding``."""
    strict: bool = True
    """math-verify's strict mode: variable names matter and sets don't equal tuples."""
    set_relation: bool = True
    """An inequality answers an interval gold (``-2 \\le x \\le 7`` = ``[-2, 7]``): math-verify's
    ``allow_set_relation_comp``, off there by default; the relation's set must equal the gold set exactly."""
    timeout: float | None = 5.0
    """Seconds math-verify may spend on one parse or comparison (its ``signal.alarm``, only active on a
    process's main thread). The scoring engine's per-item timeout is the hard limit that always fires."""
    gold_cache_size: int = 65536
    """Distinct references whose parsed form is kept, and distinct (gold, answer) verdicts of the sympy path
    (RL scores many completions per problem, often with the same final answer)."""
    correct_reward: float = 1.0
    """Reward of a matching answer."""
    incorrect_reward: float = 0.0
    """Reward of a wrong answer (failures, e.g. no answer found, are always 0.0 with ``error`` set)."""


# Answers taken from prose, where ``1,22`` is a decimal comma; a box's ``1,22`` stays a list.
_PROSE_KINDS = frozenset({"whole", "answer_is", "gsm8k", "last_number"})


@dataclass
class _Answer:
    """An extracted answer in all the forms the comparison needs; ``parsed`` is filled lazily (sympy).
    ``issue``: why it is not the plain value it looks like (``5 times 3``)."""

    raw: str
    normalized: str
    extracted_by: str | None
    number: NumericAnswer | None
    parsed: dict[str, list] = field(default_factory=dict)
    issue: str | None = None

    @classmethod
    def of(cls, found: Candidate) -> _Answer:
        """The answer a reader found, normalised as its kind calls for (prose, or one value of a list)."""
        raw = found.text.strip()
        norm = normalize(raw, plain_text=found.kind in _PROSE_KINDS, single=found.parts == 1)
        return cls(raw, norm.text, found.kind, parse_number(norm.text), issue=norm.issue)

    def in_hundredths(self) -> _Answer:
        """This answer with each percent sign read as a factor 1/100 (compared so with a gold without one)."""
        raw, normalized = percent_as_hundredths(self.raw), percent_as_hundredths(self.normalized)
        return _Answer(raw, normalized, self.extracted_by, None, issue=self.issue)


_EXPLAIN_FIELDS = ("raw", "normalized", "extracted_by")


class MathVerifier(Verifier):
    """Rewards a completion whose final answer equals the reference mathematically (1.0) or not (0.0).

    ``details`` holds ``extracted`` / ``extracted_by`` / ``normalized`` for the completion, ``gold`` /
    ``gold_extracted_by`` / ``gold_normalized`` for the reference, and ``method`` (``numeric``, ``string``,
    ``math-verify``) plus ``reason``: why they matched or not.
    """

    name: ClassVar[str] = "math"
    runs_in_process: ClassVar[bool] = False
    answer_votes: ClassVar[str | None] = "math"

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        if isinstance(config.get("mode"), list):
            config["mode"] = tuple(config["mode"])
        if isinstance(config.get("gold_mode"), list):
            config["gold_mode"] = tuple(config["gold_mode"])
        self.settings = MathConfig(**config)
        if self.settings.boxes not in BOX_RULES:
            raise ValueError(f"unknown boxes rule {self.settings.boxes!r} (known: {', '.join(BOX_RULES)})")
        self._chain = resolve_mode(self.settings.mode)
        self._gold_chain = (
            None if self.settings.gold_mode == "auto" else resolve_mode(self.settings.gold_mode)
        )
        self._gold_cache: OrderedDict[str, list[_Answer]] = OrderedDict()
        self._verdicts: OrderedDict[tuple, tuple[bool, str, str]] = OrderedDict()

    # -- extraction ---------------------------------------------------------------------------------------
    def _gold_answers(self, reference: Any) -> list[_Answer]:
        refs = reference if isinstance(reference, (list, tuple)) else [reference]
        key = repr(refs)
        cached = self._gold_cache.get(key)
        if cached is not None:
            self._gold_cache.move_to_end(key)
            return cached
        answers = []
        for ref in refs:
            if ref is None:
                continue
            text = str(ref).strip()
            if not text:
                continue
            found = _read_gold(text, self._gold_chain, self.settings.boxes)
            if found is not None:
                answers.append(_Answer.of(found))
        self._gold_cache[key] = answers
        if len(self._gold_cache) > self.settings.gold_cache_size:
            self._gold_cache.popitem(last=False)
        return answers

    def extract(self, completion: str, prompt: str = "") -> _Answer | None:
        """The answer found in ``completion`` (``None`` if the extraction mode finds none)."""
        answer = self.read(completion, prompt).answer
        return None if answer is None else _Answer.of(answer)

    def _disagreement(self, pred: _Answer, others: Sequence[Candidate]) -> str | None:
        """Why the completion states more than one answer, or ``None`` when its other explicit answers agree
        with ``pred``."""
        for other in others:
            stated = _Answer.of(other)
            if not self.compare(pred, stated)[0]:
                return f"ambiguous: the completion states different answers ({pred.raw!r} and {stated.raw!r})"
        return None

    # -- comparison ---------------------------------------------------------------------------------------
    def _signal_timeout(self) -> int | None:
        # math-verify's timeout uses signal.alarm: only possible on the main thread, in whole seconds.
        # In a scoring-engine worker the engine kills an overrunning item itself (that also stops C-level
        # loops a signal cannot interrupt), so the soft signal timeout would only fire first and differ.
        if (
            self.settings.timeout is None
            or in_scoring_worker()
            or threading.current_thread() is not threading.main_thread()
        ):
            return None
        return max(1, math.ceil(self.settings.timeout))

    def _parsed(self, answer: _Answer, which: str) -> list:
        if which not in answer.parsed:
            text = answer.normalized if which == "normalized" else answer.raw
            try:
                parsed = math_verify.parse(
                    f"${text}$", parsing_timeout=self._signal_timeout(), raise_on_error=True
                )
                # math-verify parses the longest well-formed prefix it finds: ``1 - \frac{1}{ e }`` becomes
                # ``1``. A parse of a malformed fragment is no parse (else ``1 + ...`` equals ``1 - ...``).
                fragment = parsed[-1] if parsed and isinstance(parsed[-1], str) else ""
                answer.parsed[which] = [] if malformed(fragment) else parsed
            except TimeoutException:
                raise
            except Exception:
                answer.parsed[which] = []
        return answer.parsed[which]

    def _symbolic(self, gold: _Answer, pred: _Answer, which: str) -> bool:
        gold_parsed = self._parsed(gold, which)
        pred_parsed = self._parsed(pred, which)
        if not gold_parsed or not pred_parsed:
            return False
        try:
            return bool(
                math_verify.verify(
                    gold_parsed,
                    pred_parsed,
                    float_rounding=self.settings.float_rounding,
                    numeric_precision=self.settings.numeric_precision,
                    strict=self.settings.strict,
                    allow_set_relation_comp=self.settings.set_relation,
                    timeout_seconds=self._signal_timeout(),
                    raise_on_error=True,
                )
            )
        except TimeoutException:
            raise
        except Exception:
            return False

    def compare(self, gold: _Answer, pred: _Answer) -> tuple[bool, str, str]:
        """(match, method, reason) for one gold answer and one extracted answer."""
        gold_negation, pred_negation = negated(gold.raw), negated(pred.raw)
        if (gold_negation is None) != (pred_negation is None):
            which = (
                f"the answer ({pred_negation!r})" if pred_negation else f"the gold answer ({gold_negation!r})"
            )
            return False, "rejected", f"only {which} is negated"
        if gold.number is not None and pred.number is not None:
            ok, reason = numbers_equal(
                gold.number,
                pred.number,
                float_rounding=self.settings.float_rounding,
                rel_tol=self.settings.rel_tol,
            )
            return ok, "numeric", reason
        if "%" in pred.normalized and "%" not in gold.normalized:
            # a percent answer against a bare gold is its value / 100 only (normalize.numbers_equal says why)
            ok, method, reason = self.compare(gold, pred.in_hundredths())
            return ok, method, f"{reason} (percent converted)" if ok else f"{reason}; {PERCENT_REFUSAL}"
        if gold.normalized and compact(gold.normalized) == compact(pred.normalized):
            return True, "string", "identical after normalisation"
        kinds = {outer_kind(gold.normalized), outer_kind(pred.normalized)}
        if self.settings.strict and kinds == {"set", "sequence"}:
            return False, "rejected", "a set is not a tuple or an interval (strict)"
        gold_structure, pred_structure = parse_structure(gold.normalized), parse_structure(pred.normalized)
        if gold_structure is not None and pred_structure is not None:
            same = structures_equal(
                gold_structure,
                pred_structure,
                float_rounding=self.settings.float_rounding,
                rel_tol=self.settings.rel_tol,
                strict=self.settings.strict,
            )
            if same is not None:
                what = gold_structure.kind
                if what == "sequence":
                    what = f"{gold_structure.brackets} sequence"
                return same, "numeric", f"numeric {what}s {'equal' if same else 'differ'} element-wise"
        # RL scores many samples per problem and they often end in the same answer: sympy runs once per
        # distinct (gold, answer) pair.
        key = (gold.normalized, gold.raw, pred.normalized, pred.raw)
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = self._compare_symbolic(gold, pred)
            self._verdicts[key] = verdict
            if len(self._verdicts) > self.settings.gold_cache_size:
                self._verdicts.popitem(last=False)
        return verdict

    def _compare_symbolic(self, gold: _Answer, pred: _Answer) -> tuple[bool, str, str]:
        if self._symbolic(gold, pred, "normalized"):
            if distinct_numbers(self._parsed(gold, "normalized")[0], self._parsed(pred, "normalized")[0]):
                return False, "math-verify", "distinct values that only round to the same decimals"
            return True, "math-verify", "math-verify: equivalent"
        if self._constants_equal(gold, pred):
            return True, "sympy", "equal constants (exact expansion, i as the imaginary unit)"
        # Normalisation only rewrites surface forms; when it left something math-verify can't parse on
        # either side, compare the text as written.
        unparsed = not self._parsed(gold, "normalized") or not self._parsed(pred, "normalized")
        changed = gold.raw != gold.normalized or pred.raw != pred.normalized
        if unparsed and changed and self._symbolic(gold, pred, "raw"):
            return True, "math-verify", "math-verify: equivalent (as written, before normalisation)"
        if not self._parsed(pred, "normalized") and (not changed or not self._parsed(pred, "raw")):
            return False, "math-verify", "answer could not be parsed"
        return False, "math-verify", "math-verify: not equivalent"

    def _constants_equal(self, gold: _Answer, pred: _Answer) -> bool:
        """:func:`.normalize.constants_equal` on the parsed answers, within the signal timeout (a timeout is
        no proof of equality)."""
        gold_parsed, pred_parsed = self._parsed(gold, "normalized"), self._parsed(pred, "normalized")
        if not gold_parsed or not pred_parsed:
            return False
        bounded = math_verify.utils.timeout(self._signal_timeout())(constants_equal)
        try:
            return bounded(gold_parsed[0], pred_parsed[0])
        except TimeoutException:
            return False

    def warmup(self) -> None:
        """Parses a few typical answers so that the LaTeX parser's caches are built (the scoring engine calls
        this before forking workers, which then inherit warm caches instead of each building its own)."""
        samples = [
            "\\frac{1}{2}",
            "2\\sqrt{3}",
            "(1, 2]",
            "\\{1,2\\}",
            "x^2+2x+1",
            "3\\pi",
            "(1,2)",
            "1, 2",
            "\\begin{pmatrix}1\\\\2\\end{pmatrix}",
            "\\text{(B)}",
            "y=2x+1",
            "[0,\\infty)",
            "10^{3}",
        ]
        gold = _Answer("1", "1", "whole", None)
        for text in samples:
            with contextlib.suppress(BaseException):  # a warm-up never fails the run
                self._symbolic(gold, _Answer(text, text, "boxed", None), "normalized")

    # -- Verifier -----------------------------------------------------------------------------------------
    def verify(self, record: Record) -> Result:
        golds = self._gold_answers(record.reference)
        if not golds:
            return Result.failure("invalid reference: empty gold answer")
        details: dict[str, Any] = {
            "gold": golds[0].raw,
            "gold_normalized": golds[0].normalized,
            "gold_extracted_by": golds[0].extracted_by,
        }
        reading = self.read(record.completion_text, record.prompt_text)
        if reading.answer is None:
            why = {"reason": reading.problem} if reading.problem else {}
            return Result.failure(
                "no answer found", **details, extracted=None, mode=_mode_name(self.settings.mode), **why
            )
        pred = _Answer.of(reading.answer)
        details.update(
            extracted=pred.raw,
            extracted_by=pred.extracted_by,
            # where the answer sits in the completion text, [start, end) (rewardlab view highlights it)
            extracted_span=[reading.answer.start, reading.answer.end],
            normalized=pred.normalized,
        )
        try:
            problem = self.refusal(reading, pred)
            if problem:
                details.update(match=False, method="rejected", reason=problem)
                return Result(reward=self.settings.incorrect_reward, details=details)
            verdicts = []
            for gold in golds:
                ok, method, reason = self.compare(gold, pred)
                verdicts.append((ok, method, reason, gold))
                if ok:
                    break
        except TimeoutException:
            return Result.failure("timeout", **details)
        ok, method, reason, gold = verdicts[-1]
        if len(golds) > 1:
            details.update(
                gold=gold.raw, gold_normalized=gold.normalized, gold_extracted_by=gold.extracted_by
            )
        details.update(match=ok, method=method, reason=reason)
        reward = self.settings.correct_reward if ok else self.settings.incorrect_reward
        return Result(reward=reward, details=details)

    def read(self, completion: str, prompt: str = "") -> Reading:
        """Where ``completion`` states its final answer, by this verifier's extraction chain (``mode``)."""
        return read_answer(completion, self._chain, prompt, self.settings.boxes)

    def refusal(self, reading: Reading, pred: _Answer) -> str | None:
        """Why a found answer does not count (cut off, negated, retracted, hedged, malformed or
        self-contradicting: docs/math.md, "Decision policy"), or ``None`` when it counts."""
        return reading.problem or pred.issue or _hedge(pred) or self._disagreement(pred, reading.must_agree)

    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        # Gold answers are cached per distinct reference, so the RL shape (n completions per problem)
        # parses each problem's gold once; the per-record loop is otherwise the base class's.
        return [self.score(record) for record in records]

    def describe(self) -> dict[str, Any]:
        """The effective settings, for logs and reports."""
        return asdict(self.settings)

    @classmethod
    def group_answers(cls, answers: Sequence[str | None]) -> list[int | None]:
        """maj@k's classes of extracted answers by math equivalence (:func:`.grouping.group_answers`)."""
        # lazy: grouping.py builds on this module's MathVerifier (an import cycle at module level)
        from rewardlab.verifiers.math.grouping import group_answers

        return group_answers(answers)


_OR = re.compile(r"\bor\b", re.IGNORECASE)


def _hedge(answer: _Answer) -> str | None:
    """An "or" that normalisation did not turn into a list of values (``12 (or 13 if ...)``) is a hedge."""
    return "hedged: 'or' in the answer" if _OR.search(answer.normalized) else None


def _read_gold(text: str, chain: tuple[str, ...] | None, boxes: str = "group") -> Candidate | None:
    """The gold answer of a reference: with ``gold_mode="auto"`` its last box group (``\\boxed{1} and
    \\boxed{2}`` is one answer; with ``boxes="last"`` its last box), else its ``####`` line, else the whole
    text; else the mode's answer."""
    if chain is not None:
        return read_answer(text, chain, boxes=boxes).answer
    boxes_found = box_groups(text, rule=boxes)[0]
    if boxes_found:
        return boxes_found[-1]
    gsm8k = extract_gsm8k(text)
    if gsm8k is not None:
        return Candidate(gsm8k, "gsm8k", 0, len(text))
    return Candidate(text, "whole", 0, len(text))


def _mode_name(mode: str | tuple[str, ...]) -> str:
    return mode if isinstance(mode, str) else "+".join(mode)
