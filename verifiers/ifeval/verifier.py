"""``IFEvalVerifier``: scores a response against the IFEval instructions of its record, strict and loose.

Record mapping (an IFEval JSONL row scores as it is):

- ``instruction_id_list`` and ``kwargs`` come from ``record.reference`` (a dict, or its JSON text) or,
  when the reference has none, from the row itself (``record.metadata``, where unknown columns land);
- the prompt is ``reference["prompt"]`` if given, else ``record.prompt`` (``combination:repeat_prompt``
  uses it when its kwargs carry no ``prompt_to_repeat``);
- the response is ``record.completion``; a row whose completion is empty but that has a ``response``
  column (Google's response files) is scored on that column.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

from rewardlab.registry import UnknownNameError
from rewardlab.types import Record, Result, jsonable
from rewardlab.verifiers.base import Verifier
from rewardlab.verifiers.ifeval import text as T
from rewardlab.verifiers.ifeval.instructions import (
    Instruction,
    InstructionArgumentError,
    Verdict,
    build_instruction,
)
from rewardlab.verifiers.ifeval.summary import IFEvalTally

MODES = ("strict", "loose")


@dataclass
class IFEvalConfig:
    """Settings of :class:`IFEvalVerifier` (defaults follow the IFEval paper's headline metric)."""

    mode: str = "strict"
    """Which verdicts make the reward: ``"strict"`` (the response as it is) or ``"loose"`` (any of the
    reference's eight variants: first/last line removed, markdown ``*`` stripped). Both are always in
    ``details``."""

    all_or_nothing: bool = False
    """Reward 1 only when every instruction is followed (IFEval's prompt-level accuracy); else the
    fraction of instructions followed (instruction-level)."""

    language_seed: int | None = 0
    """Seed of langdetect for the language checks. The reference leaves it unseeded, so its verdict on
    short or mixed text can change between runs; ``None`` reproduces that."""

    notes: bool = True
    """Copy each instruction's known caveat about the reference check into ``details``."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")


def instruction_spec(record: Record) -> tuple[list[str], list[dict[str, Any]], str]:
    """``(instruction_id_list, kwargs, prompt)`` of a record (see the module docstring).

    Raises ``ValueError`` with a short reason when the record carries no usable instruction list.
    """
    source: Any = record.reference
    if isinstance(source, str) and source.strip().startswith("{"):
        try:
            source = json.loads(source)
        except ValueError:
            source = None
    if not (isinstance(source, dict) and "instruction_id_list" in source):
        source = record.metadata if "instruction_id_list" in (record.metadata or {}) else None
    if source is None:
        raise ValueError("no instruction_id_list in the reference or the row")
    ids = source["instruction_id_list"]
    if isinstance(ids, str):
        ids = [ids]
    if not isinstance(ids, (list, tuple)) or not all(isinstance(i, str) for i in ids):
        raise ValueError(f"instruction_id_list must be a list of ids, got {ids!r}")
    kwargs = source.get("kwargs")
    if kwargs is None:
        kwargs = [{} for _ in ids]
    if isinstance(kwargs, dict) and len(ids) == 1:
        kwargs = [kwargs]
    if not isinstance(kwargs, (list, tuple)) or len(kwargs) != len(ids):
        raise ValueError(f"kwargs must be a list with one dict per instruction ({len(ids)}), got {kwargs!r}")
    kwargs = [dict(k or {}) for k in kwargs]
    prompt = source.get("prompt") if isinstance(source.get("prompt"), str) else None
    return list(ids), kwargs, prompt if prompt is not None else record.prompt_text


def response_text(record: Record) -> str:
    """The response to score: the completion, or the row's ``response`` column when that is empty."""
    text = record.completion_text
    if not text and isinstance((record.metadata or {}).get("response"), str):
        text = record.metadata["response"]
    return text


def check_response(
    instructions: list[Instruction], response: str
) -> tuple[list[bool], list[bool], list[dict[str, Any]], list[str | None]]:
    """Strict and loose verdicts of ``response`` for each instruction, as the reference decides them.

    Returns ``(strict, loose, observed, loose_variant)``: ``observed`` is what the strict check
    measured, ``loose_variant`` names the first variant that passed the loose test (``None`` if none).
    A blank response follows nothing, as in the reference. A check that raises on some text (the
    reference would crash the whole run, e.g. ``json.loads`` on thousands of nested brackets) counts
    as not followed on that text, with the error in ``observed``; the other instructions still count.
    """
    strict, loose, observed, variants = [], [], [], []
    blank = not response.strip()
    loose_texts = [] if blank else T.loose_variants(response)
    for instruction in instructions:
        if blank:
            strict.append(False)
            loose.append(False)
            observed.append({"blank_response": True})
            variants.append(None)
            continue
        verdict = _safe_check(instruction, response)
        strict.append(verdict.followed)
        observed.append(verdict.observed)
        passed = "response" if verdict.followed else None
        if passed is None:
            for name, text in loose_texts[1:]:  # the first variant is the response itself
                if _safe_check(instruction, text).followed:
                    passed = name
                    break
        loose.append(passed is not None)
        variants.append(passed)
    return strict, loose, observed, variants


def _safe_check(instruction: Instruction, text: str) -> Verdict:
    try:
        return instruction.check(text)
    except Exception as exc:  # one pathological text must not sink the record's other instructions
        return Verdict(False, {"check_error": f"{type(exc).__name__}: {str(exc)[:120]}"})


class IFEvalVerifier(Verifier):
    """IFEval instruction-following verifier: the 25 instruction types of Google's IFEval.

    Config (see :class:`IFEvalConfig`): ``mode`` ("strict" | "loose"), ``all_or_nothing``,
    ``language_seed``, ``notes``.

    ``details`` of a result::

        {"mode": "strict", "all_or_nothing": False,
         "instructions": [{"id": ..., "kwargs": {...}, "strict": bool, "loose": bool,
                           "loose_variant": "no_first_line" | ... | None, "observed": {...},
                           "note": "..."}],
         "followed_strict": 2, "followed_loose": 3, "total": 3,
         "follow_all_strict": False, "follow_all_loose": True}

    :func:`rewardlab.verifiers.ifeval.ifeval_summary` turns a list of results into IFEval's four
    accuracies (prompt/instruction level, strict/loose).
    """

    name = "ifeval"

    @classmethod
    def summary_tallies(cls) -> dict[str, Any]:
        """IFEval's prompt- and instruction-level accuracies, strict and loose, in the run's summary."""
        return {"ifeval": IFEvalTally()}

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        known = {f.name for f in fields(IFEvalConfig)}
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(
                f"unknown ifeval option(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})"
            )
        self.cfg = IFEvalConfig(**config)

    def build(self, record: Record) -> tuple[list[str], list[dict[str, Any]], list[Instruction]]:
        """The record's instruction ids, kwargs and built checks (raises ``ValueError`` on bad data)."""
        ids, kwargs, prompt = instruction_spec(record)
        built = []
        for instruction_id, kw in zip(ids, kwargs, strict=True):
            built.append(
                build_instruction(instruction_id, kw, prompt=prompt, language_seed=self.cfg.language_seed)
            )
        return ids, kwargs, built

    def verify(self, record: Record) -> Result:
        try:
            ids, kwargs, instructions = self.build(record)
        except UnknownNameError as exc:
            return Result.failure(f"unknown instruction: {exc}")
        except InstructionArgumentError as exc:
            return Result.failure(f"invalid kwargs: {exc}")
        except ValueError as exc:
            return Result.failure(f"invalid reference: {exc}")
        if not ids:
            return Result.failure("invalid reference: empty instruction_id_list")

        strict, loose, observed, variants = check_response(instructions, response_text(record))
        entries = []
        for i, instruction in enumerate(instructions):
            entry: dict[str, Any] = {
                "id": ids[i],
                "kwargs": {k: v for k, v in kwargs[i].items() if v is not None},
                "strict": strict[i],
                "loose": loose[i],
                "loose_variant": variants[i],
                "observed": jsonable(observed[i]),
            }
            if self.cfg.notes and instruction.note:
                entry["note"] = instruction.note
            entries.append(entry)
        used = strict if self.cfg.mode == "strict" else loose
        reward = float(all(used)) if self.cfg.all_or_nothing else sum(used) / len(used)
        details: dict[str, Any] = {
            "mode": self.cfg.mode,
            "all_or_nothing": self.cfg.all_or_nothing,
            "instructions": entries,
            "followed_strict": sum(strict),
            "followed_loose": sum(loose),
            "total": len(ids),
            "follow_all_strict": all(strict),
            "follow_all_loose": all(loose),
        }
        if any(i.id == "length_constraints:number_sentences" for i in instructions) or any(
            i.id == "change_case:capital_word_frequency" for i in instructions
        ):
            details["sentence_splitter"] = T.sentence_tokenizer()[1]
        return Result(reward=reward, details=details)

    def warmup(self) -> None:
        """Loads what the first check would otherwise load: NLTK with its Punkt model, and langdetect's
        55 language profiles (together 2-10 s on a busy 2-core machine, mostly ``import nltk``, which
        imports scipy and scikit-learn). A scoring engine can call it right after building the verifier
        so that the first record's timeout does not pay for it."""
        T.sentence_tokenizer()
        T.word_tokenize("Warm up.")
        T.detect_language("warm up the language profiles", seed=self.cfg.language_seed)

    def describe(self) -> dict[str, Any]:
        """The verifier's settings (for run logs)."""
        return {"name": self.name, **asdict(self.cfg)}
