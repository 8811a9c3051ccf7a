"""Answers that name the gold without committing to it: lists with wrong items, hedge and negation words.

Token F1 and containment reward any answer that *includes* a gold alias, so a policy can list candidates
("Paris, London or Berlin"), qualify ("maybe Paris") or negate ("not Paris") and still be paid. These checks
run after the exact-match test (an answer equal to an alias is never a hedge, even when the alias is itself
a list such as "Simon and Garfunkel") and score 0 with a reason (docs/qa.md, "Decision policy").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from rewardlab.verifiers.qa.normalize import contains_tokens

# Separators of listed alternatives: punctuation, "or", "and", "and/or", "versus".
LIST_SEPARATOR = re.compile(r"[,;/|&\n]|\b(?:and/or|or|and|versus|vs)\b\.?", re.IGNORECASE)
HEDGE_WORDS = (
    "maybe",
    "perhaps",
    "possibly",
    "probably",
    "either",
    "unsure",
    "not sure",
    "i think",
    "i guess",
    "i believe",
    "might be",
    "could be",
    "likely",
)
NEGATION_WORDS = (
    "not",
    "no",
    "never",
    "neither",
    "nor",
    "none",
    "isnt",
    "wasnt",
    "arent",
    "werent",
    "dont",
    "doesnt",
    "didnt",
    "cannot",
    "cant",
    "wont",
    "nothing",
)
_HEDGE = re.compile(r"\b(?:" + "|".join(HEDGE_WORDS) + r")\b")
_NEGATION = re.compile(r"\b(?:" + "|".join(NEGATION_WORDS) + r")\b")


def list_items(answer: str, aliases: Sequence[str]) -> list[str]:
    """The items of ``answer`` read as a list (lower-cased), split at :data:`LIST_SEPARATOR`; a separator
    inside an occurrence of a gold alias (``Washington, D.C.``) does not split."""
    low = answer.lower()
    protected = [
        (m.start(), m.end())
        for alias in aliases
        if (needle := alias.lower().strip()) and LIST_SEPARATOR.search(needle)
        for m in re.finditer(re.escape(needle), low)
    ]
    items, previous = [], 0
    for sep in LIST_SEPARATOR.finditer(low):
        if any(s <= sep.start() and sep.end() <= e for s, e in protected):
            continue
        items.append(low[previous : sep.start()])
        previous = sep.end()
    items.append(low[previous:])
    return items


def listed_hedge(
    answer: str, aliases: Sequence[str], gold_tokens: Sequence[Sequence[str]], normalize: Callable[[str], str]
) -> str | None:
    """Why ``answer`` is a list that names a gold alias next to an item that is none (or None)."""
    hits, misses = [], []
    for item in list_items(answer, aliases):
        tokens = normalize(item).split()
        if not tokens:
            continue
        hit = any(contains_tokens(tokens, gold) for gold in gold_tokens)
        (hits if hit else misses).append(" ".join(tokens))
    if hits and misses:
        return f"hedged: the answer lists a gold alias with other candidates ({hits[0]!r} with {misses[0]!r})"
    return None


def hedge_word(normalized_answer: str, normalized_aliases: Sequence[str]) -> str | None:
    """Why the answer hedges or negates itself with a word no gold alias has (or None)."""
    for pattern, what in ((_HEDGE, "hedged"), (_NEGATION, "negated")):
        for match in pattern.finditer(normalized_answer):
            word = match.group(0)
            if not any(re.search(rf"\b{word}\b", alias) for alias in normalized_aliases):
                return f"{what}: the answer says {word!r}, which no gold alias does"
    return None
