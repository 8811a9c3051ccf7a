"""The search-agent demo: its demonstrations search for the entity each hop names and see the real
passages, which always hold the next hop; and (slow) it learns on every seed: +20 points of held-out exact
match with search, searching rising, none without search."""

from __future__ import annotations

import argparse
import json

import pytest

from rewardlab.data import kb
from rewardlab.demos import search as demo
from rewardlab.verifiers.qa import has_answer


@pytest.fixture(scope="module")
def seed_kb(tmp_path_factory):
    out = tmp_path_factory.mktemp("kb")
    args = argparse.Namespace(countries=60, sft_countries=20, heldout=10)
    corpus, stages = demo.knowledge_base(args, 0, out)
    return corpus, stages["sft"] + stages["rl"], stages["heldout"]


def test_each_stage_asks_about_its_own_countries(tmp_path):
    args = argparse.Namespace(countries=60, sft_countries=20, heldout=10)
    _, stages = demo.knowledge_base(args, 0, tmp_path)
    sizes = {stage: len(qs) for stage, qs in stages.items()}
    assert sizes == {"sft": 20 * 5, "rl": 30 * 5, "heldout": 10 * 5}
    countries = {stage: {q["id"].split("-")[0] for q in qs} for stage, qs in stages.items()}
    assert not countries["sft"] & countries["rl"] and not countries["rl"] & countries["heldout"]
    assert not countries["sft"] & countries["heldout"]
    assert all({q["hops"] for q in qs} == {1, 2} for qs in stages.values())


def test_every_hop_retrieves_its_support_passage_and_the_answer(seed_kb):
    """The demonstrations' searches (the entity each hop names) find the passage of that hop, cut to the
    demo's word budget, and the last one holds the answer: what the policy must learn is reachable."""
    from rewardlab.envs.search import SearchTool

    corpus, train, held = seed_kb
    tool = SearchTool(corpus=str(corpus), k=demo.TOP_K, max_words=demo.MAX_WORDS)
    for q in train + held:
        prompt, segments = demo.demonstration(q, tool)
        assert prompt == q["prompt"]
        searches, observations = segments[0:-1:2], segments[1:-1:2]
        assert [s for s, _ in searches] == [f"<search>{e}</search>" for e in q["queries"]]
        assert all(trained for _, trained in searches) and not any(t for _, t in observations)
        for support, (text, _) in zip(q["support"], observations, strict=True):
            title = next(p["title"] for p in kb.generate(60, 0).passages if p["id"] == support)
            assert text.startswith(f"<information>Doc 1(Title: {title})"), (q, text)
        passages = observations[-1][0].removeprefix("<information>").removesuffix("</information>")
        assert has_answer(passages, q["reference"]["target"][0]), (q, passages)
        assert segments[-1] == (f"<answer>{q['reference']['target'][0]}</answer>", True)


def test_demonstrations_without_search_answer_at_once(seed_kb):
    q = seed_kb[1][0]
    assert demo.demonstration(q, None) == (
        q["prompt"],
        [(f"<answer>{q['reference']['target'][0]}</answer>", True)],
    )


def test_report_takes_medians(tmp_path):
    def stage(acc, rate):
        keys = [k for k, _, _ in demo.COLUMNS]
        values = dict.fromkeys(keys, 0.0)
        values.update(accuracy_with_search=acc, search_call_rate=rate)
        return values

    rows = [
        {
            "seed": s,
            "before": stage(b, 0.5),
            "after": stage(a, 1.0),
            "gain_points": 100 * (a - b),
            "rl_episodes_per_s": 50.0,
        }
        for s, b, a in [(0, 0.3, 0.7), (1, 0.35, 0.6), (2, 0.2, 0.9)]
    ]
    result = demo.report(rows, tmp_path)
    assert result["median"]["after/accuracy_with_search"] == 0.7
    assert result["min_gain_points"] == pytest.approx(25.0)
    assert json.loads((tmp_path / "summary.json").read_text())["median_gain_points"] == pytest.approx(40.0)


@pytest.mark.slow
def test_searching_is_learned_on_three_seeds(tmp_path):
    result = demo.main(["--out", str(tmp_path), "--seeds", "0,1,2"])
    for seed in result["seeds"]:
        before, after = seed["before"], seed["after"]
        assert seed["gain_points"] >= 20, json.dumps(seed)
        assert after["search_call_rate"] > before["search_call_rate"] + 0.2, json.dumps(seed)
        # the gain is the search's: the held-out answers are nowhere but in the corpus
        assert after["accuracy_without_search"] <= 0.02, json.dumps(seed)


def test_the_shipped_reader_reads_but_has_never_searched():
    """The reader base answers reading examples of a stream it never trained on (its pretraining log says
    82.7% greedy); it has never seen Search-R1's tags."""
    from transformers import AutoModelForCausalLM

    from rewardlab.demos.reader import PRETRAIN_SEED, reading_pair
    from rewardlab.generation import SamplingParams, get_backend
    from rewardlab.hub import load_tokenizer

    model = AutoModelForCausalLM.from_pretrained(str(demo.READER))
    tokenizer = load_tokenizer(str(demo.READER))
    pairs = [reading_pair(e) for e in kb.reading_examples(60, PRETRAIN_SEED + 2)]
    backend = get_backend("hf", model, tokenizer, batch_size=64)
    out = backend.generate([p for p, _ in pairs], SamplingParams(temperature=0.0, max_new_tokens=24))
    exact = sum(o[0].text.strip() == a for o, (_, a) in zip(out, pairs, strict=True)) / len(pairs)
    assert exact >= 0.6, exact
    log = json.loads((demo.READER / "pretraining.json").read_text())
    assert log["history"][-1]["exact_match"] >= 0.8
