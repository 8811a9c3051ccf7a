"""The 25 IFEval instruction checks, one class each, in a registry keyed by the IFEval instruction ids.

Ids and keyword arguments are those of Google's IFEval data (``instruction_id_list`` / ``kwargs``), so
a row of ``google/IFEval`` builds its checks as it is::

    check = build_instruction("length_constraints:number_words", {"num_words": 300, "relation": "at least"})
    check.check("...")  # -> Verdict(followed=False, observed={"words": 12})

Every check decides exactly as the reference implementation does (Google's ``instructions.py``,
also shipped in lm-eval), quirks included; :attr:`Instruction.note` says where the reference is known
to be questionable so that a surprising verdict can be explained from the result's ``details``.
Where the reference would pick a *random* value for a missing or invalid argument (it doubles as a
prompt generator), a check here refuses with :class:`InstructionArgumentError` instead: a score must
not depend on a coin flip.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rewardlab.registry import Registry
from rewardlab.verifiers.ifeval import text as T

RELATIONS = ("less than", "at least")
CONSTRAINED_RESPONSE_OPTIONS = ("My answer is yes.", "My answer is no.", "My answer is maybe.")

LANGUAGE_NAMES = {
    "en": "English",
    "es": "Spanish",
    "pt": "Portuguese",
    "ar": "Arabic",
    "hi": "Hindi",
    "fr": "French",
    "ru": "Russian",
    "de": "German",
    "ja": "Japanese",
    "it": "Italian",
    "bn": "Bengali",
    "uk": "Ukrainian",
    "th": "Thai",
    "ur": "Urdu",
    "ta": "Tamil",
    "te": "Telugu",
    "bg": "Bulgarian",
    "ko": "Korean",
    "pl": "Polish",
    "he": "Hebrew",
    "fa": "Persian",
    "vi": "Vietnamese",
    "ne": "Nepali",
    "sw": "Swahili",
    "kn": "Kannada",
    "mr": "Marathi",
    "gu": "Gujarati",
    "pa": "Punjabi",
    "ml": "Malayalam",
    "fi": "Finnish",
}
"""The languages IFEval's ``language:response_language`` prompts ask for (ISO 639-1 -> name)."""

LANGDETECT_NOTE = (
    "language decided by langdetect, as in the reference; langdetect is unreliable on short or "
    "mixed-language text, and the reference does not seed it (its verdict can change between runs): "
    "here it is seeded (language_seed); text with no letters cannot be detected and counts as "
    "followed, as in the reference"
)


class InstructionArgumentError(ValueError):
    """The kwargs of an instruction are missing, unknown, or of the wrong type."""


@dataclass
class Verdict:
    """Whether a response follows one instruction, and what was measured to decide it."""

    followed: bool
    observed: dict[str, Any] = field(default_factory=dict)


INSTRUCTIONS: Registry[type[Instruction]] = Registry("IFEval instruction")


def register_instruction(instruction_id: str):
    """Class decorator: registers an :class:`Instruction` subclass under ``instruction_id``."""

    def decorator(cls: type[Instruction]) -> type[Instruction]:
        cls.id = instruction_id
        INSTRUCTIONS.register(instruction_id, cls)
        return cls

    return decorator


def build_instruction(
    instruction_id: str, kwargs: Mapping[str, Any] | None = None, *, prompt: str = "", **options: Any
) -> Instruction:
    """The check for ``instruction_id`` built from its IFEval ``kwargs``.

    ``None`` values are dropped first (the Hugging Face ``google/IFEval`` rows carry every argument
    name, unused ones as ``None``). ``prompt`` is the row's prompt (``combination:repeat_prompt`` falls
    back to it when ``prompt_to_repeat`` is missing); ``options`` are verifier-wide settings
    (``language_seed``).
    """
    cls = INSTRUCTIONS.get(instruction_id)
    clean = {k: v for k, v in dict(kwargs or {}).items() if v is not None}
    return cls(clean, prompt=prompt, **options)


def _int_arg(kwargs: Mapping[str, Any], name: str) -> int:
    value = kwargs.get(name)
    if isinstance(value, bool) or value is None:
        raise InstructionArgumentError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int):
        raise InstructionArgumentError(f"{name} must be an integer, got {value!r}")
    if value < 0:
        raise InstructionArgumentError(f"{name} must be >= 0, got {value}")
    return value


def _str_arg(kwargs: Mapping[str, Any], name: str) -> str:
    value = kwargs.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InstructionArgumentError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _relation_arg(kwargs: Mapping[str, Any], name: str) -> str:
    value = kwargs.get(name)
    if value not in RELATIONS:
        raise InstructionArgumentError(f"{name} must be one of {RELATIONS}, got {value!r}")
    return value


def _compare(count: int, relation: str, threshold: int) -> bool:
    return count < threshold if relation == "less than" else count >= threshold


def _search(pattern: str, text: str, flags: int = 0) -> re.Match | None:
    """``re.search`` as the reference does it (the keyword is a regex); a keyword that is not a valid
    regex (where the reference would crash) is matched literally."""
    try:
        return re.search(pattern, text, flags)
    except re.error:
        return re.search(re.escape(pattern), text, flags)


def _findall(pattern: str, text: str, flags: int = 0) -> list:
    try:
        return re.findall(pattern, text, flags)
    except re.error:
        return re.findall(re.escape(pattern), text, flags)


class Instruction:
    """One IFEval instruction: built from its kwargs, checks a response.

    Subclasses set :attr:`args` (the kwarg names, all required unless listed in :attr:`optional`),
    parse them in :meth:`setup`, and implement :meth:`check`. :attr:`note` says where the reference
    check is known to be questionable; it is copied into the result's ``details``.
    """

    id: ClassVar[str] = ""
    args: ClassVar[tuple[str, ...]] = ()
    optional: ClassVar[tuple[str, ...]] = ()
    note: ClassVar[str | None] = None

    def __init__(self, kwargs: Mapping[str, Any] | None = None, *, prompt: str = "", **options: Any) -> None:
        kwargs = dict(kwargs or {})
        unknown = sorted(set(kwargs) - set(self.args))
        if unknown:
            raise InstructionArgumentError(
                f"{self.id}: unknown argument(s) {', '.join(unknown)} (takes: {', '.join(self.args) or 'none'})"
            )
        missing = [a for a in self.args if a not in kwargs and a not in self.optional]
        if missing:
            raise InstructionArgumentError(f"{self.id}: missing argument(s) {', '.join(missing)}")
        self.kwargs = kwargs
        self.prompt = prompt
        self.options = options
        try:
            self.setup(kwargs)
        except InstructionArgumentError as exc:
            raise InstructionArgumentError(f"{self.id}: {exc}") from None

    def setup(self, kwargs: dict[str, Any]) -> None:
        """Parses and validates the kwargs (raise :class:`InstructionArgumentError`)."""

    def check(self, response: str) -> Verdict:
        """Whether ``response`` follows the instruction (as the reference's ``check_following``)."""
        raise NotImplementedError

    def description(self) -> str:
        """The instruction as IFEval words it to the model."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r}, {self.kwargs!r})"


# ---------------------------------------------------------------------------------------------------
# keywords


@register_instruction("keywords:existence")
class KeywordExistence(Instruction):
    """Every keyword appears (case-insensitive)."""

    args = ("keywords",)
    note = (
        "keywords matched as case-insensitive regular expressions anywhere in the text, as in the "
        "reference: no word boundaries, so 'art' is found inside 'start'"
    )

    def setup(self, kwargs):
        keywords = kwargs["keywords"]
        if isinstance(keywords, str) or not keywords or not all(isinstance(k, str) for k in keywords):
            raise InstructionArgumentError(f"keywords must be a non-empty list of strings, got {keywords!r}")
        self.keywords = sorted(keywords)

    def check(self, response):
        missing = [k for k in self.keywords if not _search(k, response, re.IGNORECASE)]
        return Verdict(not missing, {"missing": missing})

    def description(self):
        return f"Include keywords {self.keywords} in the response."


@register_instruction("keywords:frequency")
class KeywordFrequency(Instruction):
    """A keyword appears ``less than`` / ``at least`` ``frequency`` times."""

    args = ("keyword", "frequency", "relation")
    note = (
        "occurrences counted as case-insensitive regex matches anywhere in the text, as in the "
        "reference: no word boundaries, so 'art' also counts inside 'start'"
    )

    def setup(self, kwargs):
        self.keyword = _str_arg(kwargs, "keyword").strip()
        self.frequency = _int_arg(kwargs, "frequency")
        self.relation = _relation_arg(kwargs, "relation")

    def check(self, response):
        count = len(_findall(self.keyword, response, re.IGNORECASE))
        return Verdict(_compare(count, self.relation, self.frequency), {"count": count})

    def description(self):
        return (
            f"In your response, the word {self.keyword} should appear {self.relation} {self.frequency} times."
        )


@register_instruction("keywords:forbidden_words")
class ForbiddenWords(Instruction):
    """None of the words appears as a whole word (case-insensitive)."""

    args = ("forbidden_words",)

    def setup(self, kwargs):
        words = kwargs["forbidden_words"]
        if isinstance(words, str) or not words or not all(isinstance(w, str) for w in words):
            raise InstructionArgumentError(
                f"forbidden_words must be a non-empty list of strings, got {words!r}"
            )
        self.words = sorted(set(words))

    def check(self, response):
        found = [w for w in self.words if _search(r"\b" + w + r"\b", response, re.IGNORECASE)]
        return Verdict(not found, {"found": found})

    def description(self):
        return f"Do not include keywords {self.words} in the response."


@register_instruction("keywords:letter_frequency")
class LetterFrequency(Instruction):
    """A letter appears ``less than`` / ``at least`` ``let_frequency`` times (case-insensitive)."""

    args = ("letter", "let_frequency", "let_relation")

    def setup(self, kwargs):
        letter = kwargs["letter"]
        if not isinstance(letter, str) or len(letter) != 1:
            raise InstructionArgumentError(f"letter must be one character, got {letter!r}")
        self.letter = letter.lower()
        if not "a" <= self.letter <= "z":
            # IFEval itself has such rows (letter "#", "!"): the reference then checks a *random* ASCII
            # letter, a coin flip no score should rest on. The evident intent is counted instead.
            self.note = (
                f"letter {letter!r} is not an ASCII letter: the reference checks a random letter instead "
                "(its verdict is random); here the given character is counted"
            )
        self.frequency = _int_arg(kwargs, "let_frequency")
        self.relation = _relation_arg(kwargs, "let_relation")

    def check(self, response):
        count = response.lower().count(self.letter)
        return Verdict(_compare(count, self.relation, self.frequency), {"count": count})

    def description(self):
        return (
            f"In your response, the letter {self.letter} should appear {self.relation} "
            f"{self.frequency} times."
        )


# ---------------------------------------------------------------------------------------------------
# language


class _LanguageCheck(Instruction):
    """Shared langdetect access with the verifier's seed."""

    note = LANGDETECT_NOTE

    def _detect(self, response: str) -> str | None:
        try:
            return T.detect_language(response, seed=self.options.get("language_seed", 0))
        except T.UndetectableLanguage:
            return None


@register_instruction("language:response_language")
class ResponseLanguage(_LanguageCheck):
    """The whole response is in ``language`` (an ISO 639-1 code, as langdetect reports it)."""

    args = ("language",)

    def setup(self, kwargs):
        self.language = _str_arg(kwargs, "language")

    def check(self, response):
        detected = self._detect(response)
        if detected is None:  # the reference counts an undetectable text as followed
            return Verdict(True, {"detected": None})
        return Verdict(detected == self.language, {"detected": detected})

    def description(self):
        name = LANGUAGE_NAMES.get(self.language, self.language)
        return f"Your ENTIRE response should be in {name} language, no other language is allowed."


# ---------------------------------------------------------------------------------------------------
# length constraints


@register_instruction("length_constraints:number_sentences")
class NumberOfSentences(Instruction):
    """``less than`` / ``at least`` ``num_sentences`` sentences."""

    args = ("num_sentences", "relation")
    note = (
        "sentences counted by NLTK Punkt (English), as in the reference: a sentence ends at '.', '?' or "
        "'!' followed by space (not after known abbreviations), so bullet items, headings and lines "
        "without final punctuation merge with the next sentence"
    )

    def setup(self, kwargs):
        self.num_sentences = _int_arg(kwargs, "num_sentences")
        self.relation = _relation_arg(kwargs, "relation")

    def check(self, response):
        count = T.count_sentences(response)
        return Verdict(_compare(count, self.relation, self.num_sentences), {"sentences": count})

    def description(self):
        return f"Your response should contain {self.relation} {self.num_sentences} sentences."


@register_instruction("length_constraints:number_paragraphs")
class NumberOfParagraphs(Instruction):
    """Exactly ``num_paragraphs`` paragraphs separated by the markdown divider ``***``."""

    args = ("num_paragraphs",)
    note = (
        "paragraphs are split on '***' only, as in the reference; an empty paragraph between dividers fails"
    )

    _SPLIT = re.compile(r"\s?\*\*\*\s?")

    def setup(self, kwargs):
        self.num_paragraphs = _int_arg(kwargs, "num_paragraphs")

    def check(self, response):
        parts = self._SPLIT.split(response)
        count = len(parts)
        for index, part in enumerate(parts):
            if not part.strip():
                if index in (0, len(parts) - 1):
                    count -= 1  # a divider at the very start or end does not open a paragraph
                else:
                    return Verdict(False, {"paragraphs": None, "empty_paragraph": index + 1})
        return Verdict(count == self.num_paragraphs, {"paragraphs": count})

    def description(self):
        return (
            f"There should be {self.num_paragraphs} paragraphs. "
            "Paragraphs are separated with the markdown divider: ***"
        )


@register_instruction("length_constraints:number_words")
class NumberOfWords(Instruction):
    """``less than`` / ``at least`` ``num_words`` words (runs of ``\\w``)."""

    args = ("num_words", "relation")

    def setup(self, kwargs):
        self.num_words = _int_arg(kwargs, "num_words")
        self.relation = _relation_arg(kwargs, "relation")

    def check(self, response):
        count = T.count_words(response)
        return Verdict(_compare(count, self.relation, self.num_words), {"words": count})

    def description(self):
        return f"Answer with {self.relation} {self.num_words} words."


_FIRST_WORD_STOP = frozenset(".,?!'\"")


@register_instruction("length_constraints:nth_paragraph_first_word")
class NthParagraphFirstWord(Instruction):
    """Exactly ``num_paragraphs`` paragraphs (split on blank lines) and paragraph ``nth_paragraph``
    starts with ``first_word``."""

    args = ("num_paragraphs", "nth_paragraph", "first_word")
    note = (
        "paragraphs are split on '\\n\\n' and the n-th is taken among all pieces, empty ones "
        "included, as in the reference (three newlines in a row shift the count)"
    )

    _SPLIT = re.compile(r"\n\n")

    def setup(self, kwargs):
        self.num_paragraphs = _int_arg(kwargs, "num_paragraphs")
        self.nth_paragraph = _int_arg(kwargs, "nth_paragraph")
        if not 1 <= self.nth_paragraph <= self.num_paragraphs:
            # The reference draws a random paragraph here; refuse instead.
            raise InstructionArgumentError(
                f"nth_paragraph must be in 1..num_paragraphs ({self.num_paragraphs}), got {self.nth_paragraph}"
            )
        self.first_word = _str_arg(kwargs, "first_word").lower()

    def check(self, response):
        parts = self._SPLIT.split(response)
        count = sum(1 for part in parts if part.strip())
        if self.nth_paragraph > count:
            return Verdict(False, {"paragraphs": count, "first_word": None})
        paragraph = parts[self.nth_paragraph - 1].strip()
        if not paragraph:
            return Verdict(False, {"paragraphs": count, "first_word": None})
        word = paragraph.split()[0].strip().lstrip("'").lstrip('"')
        first = []
        for char in word:
            if char in _FIRST_WORD_STOP:
                break
            first.append(char.lower())
        first_word = "".join(first)
        followed = count == self.num_paragraphs and first_word == self.first_word
        return Verdict(followed, {"paragraphs": count, "first_word": first_word})

    def description(self):
        return (
            f"There should be {self.num_paragraphs} paragraphs. Paragraphs and only paragraphs are "
            "separated with each other by two new lines as if it was '\\n\\n' in python. "
            f"Paragraph {self.nth_paragraph} must start with word {self.first_word}."
        )


# ---------------------------------------------------------------------------------------------------
# detectable content


@register_instruction("detectable_content:number_placeholders")
class Placeholders(Instruction):
    """At least ``num_placeholders`` placeholders in square brackets, like ``[address]``."""

    args = ("num_placeholders",)
    _RE = re.compile(r"\[.*?\]")

    def setup(self, kwargs):
        self.num_placeholders = _int_arg(kwargs, "num_placeholders")

    def check(self, response):
        count = len(self._RE.findall(response))
        return Verdict(count >= self.num_placeholders, {"placeholders": count})

    def description(self):
        return (
            f"The response must contain at least {self.num_placeholders} placeholders represented by "
            "square brackets, such as [address]."
        )


@register_instruction("detectable_content:postscript")
class Postscript(Instruction):
    """A postscript starting with ``postscript_marker`` (``P.S.``, ``P.P.S``, ...)."""

    args = ("postscript_marker",)
    note = "the marker may start any line and need not end the response, as in the reference"

    def setup(self, kwargs):
        self.marker = _str_arg(kwargs, "postscript_marker").strip()
        if self.marker == "P.P.S":
            pattern = r"\s*p\.\s?p\.\s?s.*$"
        elif self.marker == "P.S.":
            pattern = r"\s*p\.\s?s\..*$"
        else:
            pattern = r"\s*" + self.marker.lower() + r".*$"
        try:
            self._re = re.compile(pattern, re.MULTILINE)
        except re.error:
            self._re = re.compile(r"\s*" + re.escape(self.marker.lower()) + r".*$", re.MULTILINE)

    def check(self, response):
        found = self._re.search(response.lower())
        return Verdict(found is not None, {"postscript": found.group(0).strip()[:80] if found else None})

    def description(self):
        return f"At the end of your response, please explicitly add a postscript starting with {self.marker}"


# ---------------------------------------------------------------------------------------------------
# detectable format


@register_instruction("detectable_format:number_bullet_lists")
class BulletLists(Instruction):
    """Exactly ``num_bullets`` markdown bullet points (lines starting with ``*`` or ``-``)."""

    args = ("num_bullets",)
    note = "every line starting with '-' counts as a bullet (also '---' rules), as in the reference"
    _STAR = re.compile(r"^\s*\*[^\*].*$", re.MULTILINE)
    _DASH = re.compile(r"^\s*-.*$", re.MULTILINE)

    def setup(self, kwargs):
        self.num_bullets = _int_arg(kwargs, "num_bullets")

    def check(self, response):
        count = len(self._STAR.findall(response)) + len(self._DASH.findall(response))
        return Verdict(count == self.num_bullets, {"bullets": count})

    def description(self):
        return (
            f"Your answer must contain exactly {self.num_bullets} bullet points. Use the markdown bullet "
            "points such as:\n* This is point 1. \n* This is point 2"
        )


@register_instruction("detectable_format:constrained_response")
class ConstrainedResponse(Instruction):
    """Contains one of "My answer is yes.", "My answer is no.", "My answer is maybe."."""

    note = "the option may appear anywhere in the response, as in the reference"

    def check(self, response):
        value = response.strip()
        for option in CONSTRAINED_RESPONSE_OPTIONS:
            if option in value:
                return Verdict(True, {"option": option})
        return Verdict(False, {"option": None})

    def description(self):
        return f"Answer with one of the following options: {CONSTRAINED_RESPONSE_OPTIONS}"


@register_instruction("detectable_format:number_highlighted_sections")
class HighlightedSections(Instruction):
    """At least ``num_highlights`` markdown highlights ``*like this*``."""

    args = ("num_highlights",)
    note = (
        "any non-empty text between two '*' on one line counts (also '2 * 3 * 4'), and **bold** "
        "counts as a highlight, as in the reference"
    )
    _SINGLE = re.compile(r"\*[^\n\*]*\*")
    _DOUBLE = re.compile(r"\*\*[^\n\*]*\*\*")

    def setup(self, kwargs):
        self.num_highlights = _int_arg(kwargs, "num_highlights")

    def check(self, response):
        count = sum(1 for h in self._SINGLE.findall(response) if h.strip("*").strip())
        count += sum(1 for h in self._DOUBLE.findall(response) if h[2:-2].strip())
        return Verdict(count >= self.num_highlights, {"highlights": count})

    def description(self):
        return (
            f"Highlight at least {self.num_highlights} sections in your answer with markdown, "
            "i.e. *highlighted section*."
        )


@register_instruction("detectable_format:multiple_sections")
class MultipleSections(Instruction):
    """At least ``num_sections`` sections, each opened by ``{section_spliter} N``."""

    args = ("section_spliter", "num_sections")
    note = "the splitter is matched case-sensitively anywhere, not only at line starts, as in the reference"

    def setup(self, kwargs):
        self.splitter = _str_arg(kwargs, "section_spliter").strip()
        self.num_sections = _int_arg(kwargs, "num_sections")
        pattern = r"\s?" + self.splitter + r"\s?\d+\s?"
        try:
            self._re = re.compile(pattern)
        except re.error:
            self._re = re.compile(r"\s?" + re.escape(self.splitter) + r"\s?\d+\s?")

    def check(self, response):
        count = len(self._re.split(response)) - 1
        return Verdict(count >= self.num_sections, {"sections": count})

    def description(self):
        s = self.splitter
        return (
            f"Your response must have {self.num_sections} sections. Mark the beginning of each section "
            f"with {s} X, such as:\n{s} 1\n[content of section 1]\n{s} 2\n[content of section 2]"
        )


@register_instruction("detectable_format:json_format")
class JsonFormat(Instruction):
    """The whole response is JSON (optionally in a ``` fence)."""

    def check(self, response):
        value = response.strip()
        for prefix in ("```json", "```Json", "```JSON", "```"):
            value = value.removeprefix(prefix)
        value = value.removesuffix("```").strip()
        try:
            json.loads(value)
        except ValueError as exc:
            return Verdict(False, {"json_error": str(exc)[:120]})
        return Verdict(True, {"json_error": None})

    def description(self):
        return "Entire output should be wrapped in JSON format. You can use markdown ticks such as ```."


@register_instruction("detectable_format:title")
class Title(Instruction):
    """A title in double angular brackets, like ``<<poem of joy>>``."""

    _RE = re.compile(r"<<[^\n]+>>")

    def check(self, response):
        titles = [t.lstrip("<").rstrip(">").strip() for t in self._RE.findall(response)]
        titles = [t for t in titles if t]
        return Verdict(bool(titles), {"title": titles[0] if titles else None})

    def description(self):
        return (
            "Your answer must contain a title, wrapped in double angular brackets, such as <<poem of joy>>."
        )


# ---------------------------------------------------------------------------------------------------
# combination


@register_instruction("combination:two_responses")
class TwoResponses(Instruction):
    """Two different responses separated by ``******``."""

    def check(self, response):
        valid = []
        parts = response.split("******")
        for index, part in enumerate(parts):
            if not part.strip():
                if index not in (0, len(parts) - 1):
                    return Verdict(False, {"responses": None, "empty_response": index + 1})
            else:
                valid.append(part)
        followed = len(valid) == 2 and valid[0].strip() != valid[1].strip()
        return Verdict(followed, {"responses": len(valid)})

    def description(self):
        return (
            "Give two different responses. Responses and only responses should be separated by "
            "6 asterisk symbols: ******."
        )


@register_instruction("combination:repeat_prompt")
class RepeatPrompt(Instruction):
    """Starts by repeating ``prompt_to_repeat`` word for word (case-insensitive)."""

    args = ("prompt_to_repeat",)
    optional = ("prompt_to_repeat",)

    def setup(self, kwargs):
        to_repeat = kwargs.get("prompt_to_repeat") or self.prompt
        if not isinstance(to_repeat, str) or not to_repeat.strip():
            raise InstructionArgumentError("prompt_to_repeat is missing and the record has no prompt")
        self.prompt_to_repeat = to_repeat

    def check(self, response):
        return Verdict(response.strip().lower().startswith(self.prompt_to_repeat.strip().lower()))

    def description(self):
        return (
            "First repeat the request word for word without change, then give your answer (1. do not "
            "say any words or characters before repeating the request; 2. the request you need to "
            "repeat does not include this sentence)"
        )


# ---------------------------------------------------------------------------------------------------
# start / end


@register_instruction("startend:end_checker")
class EndPhrase(Instruction):
    """Ends with ``end_phrase`` (case-insensitive; surrounding double quotes ignored)."""

    args = ("end_phrase",)

    def setup(self, kwargs):
        self.end_phrase = _str_arg(kwargs, "end_phrase").strip()

    def check(self, response):
        value = response.strip().strip('"').lower()
        return Verdict(value.endswith(self.end_phrase.lower()), {"ending": value[-len(self.end_phrase) :]})

    def description(self):
        return (
            f"Finish your response with this exact phrase {self.end_phrase}. "
            "No other words should follow this phrase."
        )


@register_instruction("startend:quotation")
class Quotation(Instruction):
    """The whole response is wrapped in double quotation marks."""

    def check(self, response):
        value = response.strip()
        return Verdict(len(value) > 1 and value[0] == '"' and value[-1] == '"')

    def description(self):
        return "Wrap your entire response with double quotation marks."


# ---------------------------------------------------------------------------------------------------
# change case


@register_instruction("change_case:capital_word_frequency")
class CapitalWordFrequency(Instruction):
    """Words in all capitals appear ``less than`` / ``at least`` ``capital_frequency`` times."""

    args = ("capital_frequency", "capital_relation")
    note = (
        "words are nltk.word_tokenize tokens, as in the reference: 'I', 'A' and all-capital "
        "abbreviations count"
    )

    def setup(self, kwargs):
        self.frequency = _int_arg(kwargs, "capital_frequency")
        self.relation = _relation_arg(kwargs, "capital_relation")

    def check(self, response):
        count = sum(1 for word in T.word_tokenize(response) if word.isupper())
        return Verdict(_compare(count, self.relation, self.frequency), {"capital_words": count})

    def description(self):
        return (
            f"In your response, words with all capital letters should appear {self.relation} "
            f"{self.frequency} times."
        )


@register_instruction("change_case:english_capital")
class EnglishCapital(_LanguageCheck):
    """The whole response is English and in capital letters."""

    def check(self, response):
        if not response.isupper():
            return Verdict(False, {"all_capitals": False})
        detected = self._detect(response)
        followed = detected is None or detected == "en"
        return Verdict(followed, {"all_capitals": True, "detected": detected})

    def description(self):
        return "Your entire response should be in English, and in all capital letters."


@register_instruction("change_case:english_lowercase")
class EnglishLowercase(_LanguageCheck):
    """The whole response is English and in lowercase letters."""

    def check(self, response):
        if not response.islower():
            return Verdict(False, {"all_lowercase": False})
        detected = self._detect(response)
        followed = detected is None or detected == "en"
        return Verdict(followed, {"all_lowercase": True, "detected": detected})

    def description(self):
        return (
            "Your entire response should be in English, and in all lowercase letters. "
            "No capital letters are allowed."
        )


# ---------------------------------------------------------------------------------------------------
# punctuation


@register_instruction("punctuation:no_comma")
class NoComma(Instruction):
    """No comma (ASCII ``,``) anywhere."""

    note = "only the ASCII comma counts, as in the reference (a full-width '，' passes)"

    def check(self, response):
        count = response.count(",")
        return Verdict(count == 0, {"commas": count})

    def description(self):
        return "In your entire response, refrain from the use of any commas."


INSTRUCTION_IDS: tuple[str, ...] = tuple(INSTRUCTIONS.names())
"""The 25 instruction ids of Google's IFEval, sorted."""
