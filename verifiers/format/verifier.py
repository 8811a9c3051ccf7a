"""``FormatVerifier``: structure rewards of R1-style RL (``<think>...</think><answer>...</answer>``) and regexes.

DeepSeek-R1 (2025) trains with two rule rewards: accuracy, and a *format* reward that requires the
reasoning inside ``<think>`` tags and the final answer inside ``<answer>`` tags. open-r1 and TRL examples
implement the format reward as one regex over the whole completion
(``^<think>\\n.*?\\n</think>\\n<answer>\\n.*?\\n</answer>$``) plus a soft "tag count" reward (0.25 per
tag seen exactly once). This verifier checks the same structure step by step, so ``details`` says which
rule failed, and every rule is a config option. ``mode="regex"`` scores arbitrary regexes instead.

Many RLVR recipes gate correctness on the format (a right answer outside ``<answer>`` tags scores 0), which
stops the policy from dropping the format once it is correct. :func:`format_and_correct` builds that pairing:
the format verifier, plus a correctness verifier scored on the text inside the answer block, combined by
:class:`rewardlab.verifiers.combine.CombinedSource` (``CombinedVerifier`` here is that type).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rewardlab.types import Record, Result
from rewardlab.verifiers.base import RewardSource, Verifier
from rewardlab.verifiers.combine import CombinedSource, resolve_part

_COMBINE_KEYS = ("correct", "correct_config", "combine", "format_weight", "correct_weight")
_FLAGS = {"DOTALL": re.DOTALL, "MULTILINE": re.MULTILINE, "IGNORECASE": re.IGNORECASE, "VERBOSE": re.VERBOSE}


@dataclass
class FormatConfig:
    """Options of :class:`FormatVerifier`; the defaults are DeepSeek-R1's format reward."""

    mode: str = "think_answer"
    """``think_answer``: the reasoning/answer tag structure; ``regex``: the ``patterns`` below."""
    think_tag: str = "think"
    """Name of the reasoning tag (``<think>``)."""
    answer_tag: str = "answer"
    """Name of the answer tag (``<answer>``)."""
    require_think: bool = True
    """The reasoning block must be present. False: it may be absent (the answer block alone passes)."""
    think_prefilled: bool = False
    """The prompt already ends with ``<think>`` (R1's chat template), so the completion starts inside the
    reasoning: no opening think tag is expected, and one more counts as a repeated tag."""
    allow_leading_whitespace: bool = True
    """Whitespace before the first tag is accepted."""
    allow_trailing_whitespace: bool = True
    """Whitespace after ``</answer>`` is accepted (a trailing newline or EOS artefact)."""
    allow_text_between: bool = False
    """Non-whitespace text between ``</think>`` and ``<answer>`` is accepted."""
    require_newlines: bool = False
    """open-r1's stricter layout: a newline after each opening tag and before each closing tag, and
    between ``</think>`` and ``<answer>``."""
    nonempty_think: bool = False
    """The reasoning must contain non-whitespace text."""
    nonempty_answer: bool = True
    """The answer must contain non-whitespace text."""
    partial: bool = False
    """Reward the fraction of rules met instead of 1/0 (a soft format reward, like open-r1's tag count)."""
    patterns: list[Any] = field(default_factory=list)
    """``regex`` mode: patterns, each a string or ``{"pattern": str, "weight": float}``; the reward is the
    weighted fraction that match (so one pattern gives 1/0)."""
    match: str = "fullmatch"
    """``regex`` mode: ``fullmatch`` (the whole completion), ``match`` (at the start) or ``search``."""
    flags: list[str] = field(default_factory=lambda: ["DOTALL"])
    """``regex`` mode: re flags by name (DOTALL, MULTILINE, IGNORECASE, VERBOSE)."""
    strip: bool = True
    """``regex`` mode: strip surrounding whitespace from the completion before matching."""
    correct: str | None = None
    """"Format and correct" from the command line: a registered correctness verifier (``math``, ``sql``...)
    scored on the text inside the answer block and combined with the format reward (see ``combine``)."""
    correct_config: dict[str, Any] = field(default_factory=dict)
    """Config of the ``correct`` verifier."""
    combine: str = "gate"
    """How format and correctness combine: ``gate`` (correctness counts only with the right format),
    ``sum`` (``format_weight * format + correct_weight * correct``), ``product`` or ``min``."""
    format_weight: float = 1.0
    """Weight of the format reward in ``sum``/``product``."""
    correct_weight: float = 1.0
    """Weight of the correctness reward."""

    def __post_init__(self) -> None:
        if self.mode not in ("think_answer", "regex"):
            raise ValueError(f"mode must be think_answer or regex, got {self.mode!r}")
        if self.match not in ("fullmatch", "match", "search"):
            raise ValueError(f"match must be fullmatch, match or search, got {self.match!r}")
        unknown = [f for f in self.flags if f.upper() not in _FLAGS]
        if unknown:
            raise ValueError(f"unknown regex flags {unknown} (known: {sorted(_FLAGS)})")
        if self.mode == "regex" and not self.patterns:
            raise ValueError("mode='regex' needs at least one pattern in 'patterns'")


@dataclass
class Parsed:
    """The blocks found in a completion and the rules checked (name -> passed, in check order)."""

    think: str | None
    answer: str | None
    checks: dict[str, bool]

    @property
    def ok(self) -> bool:
        return all(self.checks.values())

    @property
    def failed(self) -> list[str]:
        return [name for name, passed in self.checks.items() if not passed]


class FormatVerifier(Verifier):
    """Structure reward: 1 when the completion has the configured shape, else 0 (or a fraction).

    ``details`` has ``checks`` (each rule and whether it held), ``failed`` (the rules that did not) and
    the extracted ``answer``. Use :func:`extract_answer` to get the answer text for a correctness verifier,
    or :class:`rewardlab.verifiers.format.CombinedVerifier` for "format and correct" rewards.
    """

    name = "format"

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        unknown = sorted(set(config) - set(FormatConfig.__dataclass_fields__))
        if unknown:
            raise ValueError(
                f"unknown format verifier option(s) {unknown} (known: {sorted(FormatConfig.__dataclass_fields__)})"
            )
        self.cfg = FormatConfig(**config)
        t, a = re.escape(self.cfg.think_tag), re.escape(self.cfg.answer_tag)
        self._tags = {
            "think_open": f"<{self.cfg.think_tag}>",
            "think_close": f"</{self.cfg.think_tag}>",
            "answer_open": f"<{self.cfg.answer_tag}>",
            "answer_close": f"</{self.cfg.answer_tag}>",
        }
        self._answer_re = re.compile(f"<{a}>(.*?)</{a}>", re.DOTALL)
        self._think_re = re.compile(f"<{t}>(.*?)</{t}>", re.DOTALL)
        flags = 0
        for name in self.cfg.flags:
            flags |= _FLAGS[name.upper()]
        self._combined = None
        if self.cfg.correct:
            own = {k: v for k, v in config.items() if k not in _COMBINE_KEYS}
            self._combined = format_and_correct(
                self.cfg.correct,
                correct_config=self.cfg.correct_config,
                mode=self.cfg.combine,
                format_weight=self.cfg.format_weight,
                correct_weight=self.cfg.correct_weight,
                **own,
            )
        self._patterns: list[tuple[re.Pattern[str], float, str]] = []
        for item in self.cfg.patterns:
            pattern, weight = (
                (item["pattern"], float(item.get("weight", 1.0))) if isinstance(item, dict) else (item, 1.0)
            )
            self._patterns.append((re.compile(pattern, flags), weight, pattern))

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["config"])

    # ---------------------------------------------------------------------------------- think/answer
    def parse(self, text: str) -> Parsed:
        """Checks the think/answer structure of ``text`` rule by rule."""
        cfg = self.cfg
        tags = self._tags
        counts = {name: text.count(tag) for name, tag in tags.items()}
        checks: dict[str, bool] = {}
        want_think_open = 0 if cfg.think_prefilled else 1
        has_think = counts["think_close"] > 0 or counts["think_open"] > 0
        think_required = cfg.require_think or has_think
        if think_required:
            label = (
                f"no {tags['think_open']} (prefilled)" if cfg.think_prefilled else f"one {tags['think_open']}"
            )
            checks[label] = counts["think_open"] == want_think_open
            checks[f"one {tags['think_close']}"] = counts["think_close"] == 1
        checks[f"one {tags['answer_open']}"] = counts["answer_open"] == 1
        checks[f"one {tags['answer_close']}"] = counts["answer_close"] == 1

        # Positions of the first occurrence of each tag (-1 when absent) give the order and the gaps.
        pos = {name: text.find(tag) for name, tag in tags.items()}
        sequence = ["answer_open", "answer_close"]
        if think_required:
            sequence = (
                ["think_close", *sequence]
                if cfg.think_prefilled
                else ["think_open", "think_close", *sequence]
            )
        present = all(pos[n] >= 0 for n in sequence)
        checks["tags in order"] = present and all(
            pos[x] < pos[y] for x, y in zip(sequence, sequence[1:], strict=False)
        )

        think = answer = None
        if present and checks["tags in order"]:
            if think_required:
                body_start = 0 if cfg.think_prefilled else pos["think_open"] + len(tags["think_open"])
                think = text[body_start : pos["think_close"]]
            answer = text[pos["answer_open"] + len(tags["answer_open"]) : pos["answer_close"]]
            if not (think_required and cfg.think_prefilled):  # prefilled: the text starts in the reasoning
                before = text[: pos[sequence[0]]]
                checks["nothing before the first tag"] = before == "" or (
                    cfg.allow_leading_whitespace and before.strip() == ""
                )
            if think_required:
                between = text[pos["think_close"] + len(tags["think_close"]) : pos["answer_open"]]
                checks["nothing between the blocks"] = cfg.allow_text_between or between.strip() == ""
            after = text[pos["answer_close"] + len(tags["answer_close"]) :]
            checks["nothing after the answer"] = after == "" or (
                cfg.allow_trailing_whitespace and after.strip() == ""
            )
            if cfg.require_newlines:
                nl = True
                if think_required:
                    nl &= (think or "").startswith("\n") or cfg.think_prefilled
                    nl &= (think or "").endswith("\n")
                    nl &= "\n" in between
                nl &= answer.startswith("\n") and answer.endswith("\n")
                checks["newlines around tag contents"] = nl
            if think_required and cfg.nonempty_think:
                checks["reasoning not empty"] = bool((think or "").strip())
            if cfg.nonempty_answer:
                checks["answer not empty"] = bool(answer.strip())
        else:
            # Later rules cannot be judged without the blocks: they count as failed, so that the partial
            # reward's denominator is the same for every completion.
            later = [] if think_required and cfg.think_prefilled else ["nothing before the first tag"]
            later += ["nothing between the blocks"] if think_required else []
            later += ["nothing after the answer"]
            later += ["newlines around tag contents"] if cfg.require_newlines else []
            later += ["reasoning not empty"] if think_required and cfg.nonempty_think else []
            later += ["answer not empty"] if cfg.nonempty_answer else []
            checks.update(dict.fromkeys(later, False))
        return Parsed(think=think, answer=answer, checks=checks)

    def extract_answer(self, text: str) -> str | None:
        """The text inside the (last) answer block, or None when there is none. Independent of whether
        the rest of the format holds, so a correctness verifier can still score a sloppy completion."""
        found = self._answer_re.findall(text)
        return found[-1].strip() if found else None

    # ------------------------------------------------------------------------------------------ verify
    def score_batch(self, records: Sequence[Record]) -> list[Result]:
        if self._combined is not None:
            return self._combined.score_batch(records)
        return super().score_batch(records)

    def verify(self, record: Record) -> Result:
        if self._combined is not None:
            return self._combined.score_batch([record])[0]
        text = record.completion_text
        if self.cfg.mode == "regex":
            return self._verify_regex(text)
        parsed = self.parse(text)
        n = len(parsed.checks)
        passed = n - len(parsed.failed)
        reward = 1.0 if parsed.ok else (passed / n if self.cfg.partial else 0.0)
        details = {"checks": parsed.checks, "failed": parsed.failed, "answer": parsed.answer}
        return Result(reward=reward, details=details, error=None)

    def _verify_regex(self, text: str) -> Result:
        if self.cfg.strip:
            text = text.strip()
        matched: dict[str, bool] = {}
        total = got = 0.0
        for regex, weight, source in self._patterns:
            hit = getattr(regex, self.cfg.match)(text) is not None
            matched[source] = hit
            total += weight
            got += weight if hit else 0.0
        reward = got / total if total else 0.0
        failed = [p for p, hit in matched.items() if not hit]
        return Result(reward=reward, details={"checks": matched, "failed": failed}, error=None)


CombinedVerifier = CombinedSource
"""The combined-source type under its format-verifier name."""


def format_and_correct(
    correct: RewardSource | str,
    *,
    correct_config: dict[str, Any] | None = None,
    mode: str = "gate",
    format_weight: float = 1.0,
    correct_weight: float = 1.0,
    score_answer_only: bool = True,
    **format_config: Any,
) -> CombinedSource:
    """The R1 pairing: a :class:`FormatVerifier` and a correctness verifier.

    Args:
        correct: The correctness source (a verifier instance or a registered name such as ``"math"``).
        correct_config: Config for ``correct`` when it is a name.
        mode: ``gate`` (default: correct counts only with the right format), ``sum`` (``format_weight *
            format + correct_weight * correct``), ``product`` or ``min``.
        score_answer_only: The correctness verifier sees only the text inside the answer block.
        **format_config: Options of the format verifier (tags, strictness...).
    """
    fmt = FormatVerifier(**format_config)
    source = resolve_part(correct, correct_config)
    return CombinedSource(
        [fmt, source],
        weights=[format_weight, correct_weight],
        mode=mode,
        answer_from=0 if score_answer_only else None,
        names=["format", getattr(source, "name", "correct")],
    )
