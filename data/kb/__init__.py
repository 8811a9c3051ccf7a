"""A synthetic knowledge base of fictional countries, cities, rivers, seas and people, for search agents.

Every name is drawn from syllables with a seed, so nothing a model could have memorised helps: a question is
answered by retrieving passages or not at all. Each country has a capital and a second city, the capital lies
on a river, the river flows into a sea, and a leader was born in a city of another country. One passage per
entity (``{"id", "title", "text"}``) states its own facts, and the capital's and the leader's passages do
not name the country, so a two-hop question ("On which river lies the capital of Vorland?") needs the
country's passage to find the capital, then the capital's to find the river.

Questions are records ``{"id", "prompt", "reference": {"target": [answer]}, "hops", "support", "queries"}``
(the ``qa`` verifier reads ``target``; ``support``: the ids of the passages that hold the answer's chain;
``queries``: the entity to search at each hop, the name in the passage's title, which a demonstration
searches).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

SYLLABLES = [
    "ka",
    "ve",
    "lo",
    "ra",
    "mi",
    "tu",
    "sen",
    "dor",
    "qua",
    "bel",
    "fin",
    "gar",
    "hol",
    "ir",
    "jan",
    "kes",
    "lum",
    "mor",
    "nal",
    "os",
    "pex",
    "rin",
    "sol",
    "tam",
    "ul",
    "vor",
    "wen",
    "xan",
    "yel",
    "zir",
    "bra",
    "cor",
    "dre",
    "fal",
    "gro",
    "kri",
    "lin",
    "mar",
    "nor",
    "pla",
    "que",
    "ros",
    "stal",
    "tor",
    "vel",
    "zan",
]
PRODUCTS = ("salt", "glass", "wool", "copper", "silk", "tea", "amber", "paper", "iron", "honey")


@dataclass
class KnowledgeBase:
    passages: list[dict[str, str]] = field(default_factory=list)
    questions: list[dict[str, Any]] = field(default_factory=list)


class _Names:
    """Unique capitalised names of 2 or 3 syllables (one more per 10 draws that collide, so a large base
    still finds free names)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.used = rng, set()

    def __call__(self) -> str:
        for tries in range(1_000_000):
            length = self.rng.choice((2, 2, 3)) + tries // 10
            name = "".join(self.rng.choice(SYLLABLES) for _ in range(length)).capitalize()
            if name not in self.used:
                self.used.add(name)
                return name
        raise RuntimeError("no free name")  # unreachable: a name of 100,000 syllables is always free


def generate(countries: int = 100, seed: int = 0) -> KnowledgeBase:
    """``countries`` countries' passages (5 each) and questions (3 one-hop, 2 two-hop each). A leader is
    born in a city of another country, so no pattern of the knowledge base stands in for the retrieval."""
    rng = random.Random(seed)
    name = _Names(rng)
    seas = [name() + " Sea" for _ in range(max(1, countries // 10))]
    world = [
        {
            "country": name(),
            "capital": name(),
            "city": name(),
            "river": name(),
            "leader": f"{name()} {name()}",
            "sea": rng.choice(seas),
            "product": rng.choice(PRODUCTS),
        }
        for _ in range(countries)
    ]
    for c, w in enumerate(world):
        w["born"] = (
            world[(c + rng.randrange(1, countries)) % countries]["city"] if countries > 1 else w["city"]
        )
    kb = KnowledgeBase()
    for c, w in enumerate(world):
        kb.passages += _passages(c, w)
        kb.questions += _questions(c, w)
    return kb


def _passages(c: int, w: dict[str, str]) -> list[dict[str, str]]:
    return [
        _passage(
            f"c{c}-country",
            w["country"],
            f"{w['country']} is a country. Its capital is {w['capital']}. Its leader is {w['leader']}.",
        ),
        _passage(
            f"c{c}-capital",
            w["capital"],
            f"{w['capital']} is a city on the river {w['river']}.",
        ),
        _passage(
            f"c{c}-city", w["city"], f"{w['city']} is a city in {w['country']}, known for its {w['product']}."
        ),
        _passage(f"c{c}-river", w["river"], f"The {w['river']} is a river. It flows into the {w['sea']}."),
        _passage(f"c{c}-person", w["leader"], f"{w['leader']} was born in {w['born']}."),
    ]


def _questions(c: int, w: dict[str, str]) -> list[dict[str, Any]]:
    country, capital, river, leader = w["country"], w["capital"], w["river"], w["leader"]
    asks = [
        (f"What is the capital of {country}?", capital, ["country"], [country]),
        (f"Into which sea does the river {river} flow?", w["sea"], ["river"], [river]),
        (f"In which city was {leader} born?", w["born"], ["person"], [leader]),
        (f"On which river lies the capital of {country}?", river, ["country", "capital"], [country, capital]),
        (
            f"In which city was the leader of {country} born?",
            w["born"],
            ["country", "person"],
            [country, leader],
        ),
    ]
    return [
        {
            "id": f"c{c}-q{q}",
            "prompt": prompt,
            "reference": {"target": [answer]},
            "hops": len(support),
            "support": [f"c{c}-{s}" for s in support],
            "queries": queries,
        }
        for q, (prompt, answer, support, queries) in enumerate(asks)
    ]


def _passage(doc_id: str, title: str, text: str) -> dict[str, str]:
    return {"id": doc_id, "title": title, "text": text}


def reading_examples(count: int, seed: int, distractors: tuple[int, int] = (0, 1)) -> list[dict[str, Any]]:
    """``count`` reading-comprehension examples ``{"question", "passages", "answer"}``: a question of a
    fresh knowledge base with the passages that answer it and a few others of the same base (between
    ``distractors[0]`` and ``distractors[1]``), in random order. What a base model pretrains on to read, not
    to search: the passages are given."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    while len(out) < count:
        base = generate(20, seed=rng.randrange(2**31))
        by_id = {p["id"]: p for p in base.passages}
        for q in rng.sample(base.questions, min(len(base.questions), count - len(out))):
            chosen = [by_id[s] for s in q["support"]]
            others = [p for p in base.passages if p["id"] not in q["support"]]
            chosen += rng.sample(others, rng.randint(*distractors))
            rng.shuffle(chosen)
            out.append({"question": q["prompt"], "passages": chosen, "answer": q["reference"]["target"][0]})
    return out
