"""The search tools (envs/search.py): a BM25 index over a local corpus, bounded queries, a read-only index,
rankings equal to rank-bm25's, and ``rewardlab index build``."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rewardlab.cli import main as cli_main
from rewardlab.data import kb
from rewardlab.envs import ToolEnv
from rewardlab.envs.search import (
    SearchTool,
    build_index,
    default_index_dir,
    format_passages,
    open_retriever,
)
from rewardlab.envs.tools import build_tool
from rewardlab.errors import UserError
from rewardlab.types import Record


def _write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return _write(tmp_path_factory.mktemp("kb") / "kb.jsonl", kb.generate(40, seed=1).passages)


def _query(tool, query):
    return tool.run([(None, {"query": query})], timeout=30)[0]  # room for a loaded machine


def test_search_returns_the_passage_that_answers(corpus):
    """The capital of a country is in that country's passage, which ranks first, in Search-R1's format."""
    tool = build_tool("search", {"corpus": str(corpus), "k": 3})
    knowledge = kb.generate(40, seed=1)
    first = knowledge.passages[0]
    result = _query(tool, knowledge.questions[0]["prompt"])
    assert result.error is None
    assert result.output.startswith(f"Doc 1(Title: {first['title']}) {first['text']}")
    assert result.output.count("\n") == 2  # three passages
    assert default_index_dir(corpus).is_dir()  # built beside the corpus, once


def test_open_returns_a_document_by_id(corpus):
    tool = build_tool("open", {"corpus": str(corpus)})
    got, missing, bad = tool.run([(None, {"id": "c3-river"}), (None, {"id": "nope"}), (None, {"id": [1]})], 5)
    assert "is a river" in got.output and got.error is None
    assert missing.error == "not_found"
    assert bad.error == "bad_arguments"


def test_observations_keep_to_the_word_budget(corpus):
    passages = open_retriever(str(corpus)).search([["capit"]], 10)[0]
    text = format_passages(passages, max_words=25)
    words = sum(len(line.split(")", 1)[1].split()) for line in text.splitlines())
    assert words <= 25 + text.count("...")
    assert text.endswith("...")


@pytest.mark.parametrize(
    "query, kind",
    [
        ("x" * 1_000_000, "too_large"),  # 1 MB
        (" ".join(f"w{i}" for i in range(200)), "too_large"),  # too many terms
        ("(" * 500 + "capital+)*$" + "\\" * 400, None),  # regex-hostile within the length limit: words
        ("the of and", "empty_query"),  # stop words only
    ],
    ids=["1MB", "too-many-terms", "regex-hostile", "stop-words-only"],
)
def test_hostile_queries_are_bounded(corpus, query, kind):
    tool = build_tool("search", {"corpus": str(corpus)})
    started = time.perf_counter()
    result = _query(tool, query)
    # The refusal comes before any work on the query (its kind says so); the time is a hang guard only.
    assert time.perf_counter() - started < 10
    assert result.error == kind, result.output
    assert result.output  # an observation either way


def test_a_query_for_the_gold_answer_finds_only_what_the_corpus_holds(tmp_path):
    """The tools read the index alone: an episode's gold answer that no passage holds is never shown,
    however the model asks for it (the record holding it is the calling episode's)."""
    passages = [p for p in kb.generate(20, seed=2).passages if p["id"] != "c0-capital"]
    gold = kb.generate(20, seed=2).questions[0]["reference"]["target"][0]  # c0's capital
    passages = [{**p, "text": p["text"].replace(gold, "(unknown)")} for p in passages]
    corpus = _write(tmp_path / "kb.jsonl", passages)
    env = ToolEnv(
        ["search", "open"],
        formats=["tag"],
        tool_options={"search": {"corpus": str(corpus)}, "open": {"corpus": str(corpus)}},
    )
    state = env.reset(Record(id="q", prompt="?", reference={"target": [gold]}))
    turns = [f"<search>{gold}</search>", f"<search>capital {gold}</search>", f"<open>{gold}</open>"]
    for turn in turns:
        (step,) = env.step([state], [turn], last=False)
        assert gold not in step.observation


def test_the_index_is_read_only_to_the_tools(corpus, tmp_path):
    """A read-only copy of the index serves every tool, and nothing in it changes."""
    index = tmp_path / "ro.bm25"
    build_index(corpus, index)
    before = _digest(index)
    for path in [index, *index.rglob("*")]:
        path.chmod(stat.S_IRUSR | stat.S_IXUSR if path.is_dir() else stat.S_IRUSR)
    try:
        tool = SearchTool(index=str(index))
        assert _query(tool, "capital river").error is None
        assert build_tool("open", {"index": str(index)}).run([(None, {"id": "c0-city"})], 5)[0].error is None
    finally:
        for path in [index, *index.rglob("*")]:
            path.chmod(stat.S_IRWXU)
    assert _digest(index) == before


def test_a_missing_or_corrupt_index_is_one_clear_error(corpus, tmp_path):
    with pytest.raises(UserError, match="no search index at"):
        SearchTool(index=str(tmp_path / "missing"))
    index = build_index(corpus, tmp_path / "cut.bm25")
    (index / "data.csc.index.npy").write_bytes(b"\x93NUMPY")
    with pytest.raises(UserError, match="corrupt search index"):
        SearchTool(index=str(index))
    index = build_index(corpus, tmp_path / "bad-manifest.bm25")
    (index / "rewardlab-index.json").write_text("{", encoding="utf-8")
    with pytest.raises(UserError, match="not a search index, or a corrupt one"):
        SearchTool(index=str(index))


def test_index_build_command(corpus, tmp_path, capsys):
    before = hashlib.sha256(corpus.read_bytes()).hexdigest()
    out = tmp_path / "cli.bm25"
    assert cli_main(["index", "build", str(corpus), "-o", str(out)]) == 0
    assert "200 documents indexed" in capsys.readouterr().out
    assert json.loads((out / "rewardlab-index.json").read_text())["params"]["method"] == "lucene"
    assert hashlib.sha256(corpus.read_bytes()).hexdigest() == before  # the corpus is only read
    cache = tmp_path / "cache"
    assert cli_main(["index", "build", str(corpus), "--cache-dir", str(cache)]) == 0
    assert default_index_dir(corpus, cache).is_dir()


@pytest.mark.parametrize("flag", ["-o", "--output", "--out"])
def test_index_build_output_flags(corpus, tmp_path, flag):
    # -o/--output as every command; --out, the first spelling, still works
    out = tmp_path / "flag.bm25"
    assert cli_main(["index", "build", str(corpus), flag, str(out)]) == 0
    assert (out / "rewardlab-index.json").is_file()


def test_index_build_help_hides_the_old_flag(capsys):
    with pytest.raises(SystemExit):
        cli_main(["index", "build", "--help"])
    text = capsys.readouterr().out
    assert "-o OUTPUT, --output OUTPUT" in text and "--out " not in text


@pytest.mark.parametrize(
    "rows, message",
    [
        (None, "input not found"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "id 'a' repeats"),
        ([{"title": "no id", "text": "x"}], "needs an 'id' and a 'text'"),
    ],
    ids=["missing", "repeated-id", "no-id"],
)
def test_index_build_refuses_a_bad_corpus_in_one_line(tmp_path, rows, message):
    corpus = tmp_path / "c.jsonl"
    if rows is not None:
        _write(corpus, rows)
    proc = subprocess.run(
        [sys.executable, "-m", "rewardlab.cli", "index", "build", str(corpus)],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_DATASETS_OFFLINE": "1"},
    )
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# ----------------------------------------------------------------------------------------------------------
# the search tool's own path against rank-bm25
# ----------------------------------------------------------------------------------------------------------
SQUAD = Path(__file__).resolve().parent.parent / "data" / "search"

LUCENE_STOP_WORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no"]
    + ["not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this"]
    + ["to", "was", "will", "with"]
)
"""Lucene's English stop words (``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``, Pyserini's), written out here."""

TOP_K = 10


def _shipped_corpus(name: str, folder: Path) -> tuple[Path, list[dict], list[str]]:
    """(corpus file, its rows, questions): the synthetic knowledge base's 3,000 passages (written to
    ``folder``) and 1,000 of its questions, or the shipped SQuAD 2.0 sample's 173 paragraphs and 705
    questions (data/search/README.md), read where they ship."""
    if name == "kb":
        knowledge = kb.generate(600, seed=0)
        path = _write(folder / "kb.jsonl", knowledge.passages)
        return path, knowledge.passages, [q["prompt"] for q in knowledge.questions[::3]]
    path = SQUAD / "squad2_dev_passages.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    questions = [json.loads(line) for line in (SQUAD / "squad2_dev_questions.jsonl").read_text().splitlines()]
    return path, rows, [q["prompt"] for q in questions]


def _documented_tokens(text: str, stemmer) -> list[str]:
    """envs/search.py's documented analysis, written out: lower-cased, split on ``\\b\\w\\w+\\b``, English
    stop words removed, Snowball-stemmed (PyStemmer's English stemmer, the one stemmer the index names)."""
    words = re.findall(r"(?u)\b\w\w+\b", text.lower())
    return stemmer.stemWords([w for w in words if w not in LUCENE_STOP_WORDS])


@pytest.mark.parametrize("corpus_name", ["kb", "squad"])
@pytest.mark.parametrize(
    "method, reference, scale",
    [("robertson", "BM25Okapi", "k1+1"), ("bm25+", "BM25Plus", 1.0)],
    ids=["okapi", "bm25plus"],
)
def test_rankings_equal_rank_bm25(tmp_path, method, reference, scale, corpus_name):
    """The search tool's own path (``rewardlab index build --method M --k1 1.2 --b 0.75``, then
    ``open_retriever`` on that folder, its ``terms`` for each question and its ``search``) ranks every
    question's top 10 as rank-bm25's ``BM25Okapi`` / ``BM25Plus`` (same k1, b; delta 0.5, the index's) do,
    fed the documented tokens of each title + text and question, built here without bm25s.

    Scores: equal, or (Okapi) equal times k1 + 1, a factor bm25s's Robertson variant leaves out, which no
    ranking sees. (No term of either corpus is in more than half the passages, where rank-bm25 floors Okapi's
    negative idf and bm25s does not: every matching passage scores > 0, asserted.) Ties: the retriever's
    top 10 must be a top 10 under rank-bm25's scores, in their order (the same float64 rank-bm25 score at
    every rank); it may order passages whose rank-bm25 scores are bitwise equal differently from rank-bm25's
    stable order (bm25s's top-k selection breaks ties its own way), or take other members of a tie group
    that the 10th rank cuts, and nothing else: a passage whose score is unique is at its rank exactly. How
    much that frees is bounded: at least 19% (kb) / 99% (SQuAD) of the compared positions are pinned, and
    the first passage of 99% of the questions (measured, either method: kb 19.98% of the positions and 999
    of the 1,000 first passages; SQuAD 99.6% and all 705)."""
    import rank_bm25
    import Stemmer

    corpus, rows, questions = _shipped_corpus(corpus_name, tmp_path)
    index = tmp_path / f"{method}.bm25"
    build = ["index", "build", str(corpus), "-o", str(index)]
    assert cli_main([*build, "--method", method, "--k1", "1.2", "--b", "0.75"]) == 0
    params = json.loads((index / "rewardlab-index.json").read_text())["params"]
    assert params == {
        "method": method,
        "k1": 1.2,
        "b": 0.75,
        "delta": 0.5,
        "stemmer": "english",
        "stopwords": "en",
    }
    retriever = open_retriever(index=str(index))

    stemmer = Stemmer.Stemmer("english")
    docs = [_documented_tokens(f"{r['title']}\n{r['text']}", stemmer) for r in rows]
    kwargs = {"k1": 1.2, "b": 0.75} | ({"delta": 0.5} if reference == "BM25Plus" else {})
    theirs = getattr(rank_bm25, reference)(docs, **kwargs)
    factor = 1.2 + 1 if scale == "k1+1" else 1.0
    position = {r["id"]: i for i, r in enumerate(rows)}

    terms = [retriever.terms(q) for q in questions]
    assert terms == [_documented_tokens(q, stemmer) for q in questions]  # the tool's query tokenisation
    assert all(terms)
    found = retriever.search(terms, TOP_K)
    compared = unique = first_unique = 0
    for query, passages in zip(terms, found, strict=True):
        b = theirs.get_scores(query)
        assert b.min() >= 0  # no negative idf (see the docstring)
        ranked = np.argsort(-b, kind="stable")[: min(TOP_K, int((b > 0).sum()))]
        got = np.array([position[p.id] for p in passages])
        assert len(got) == len(ranked) > 0 and len(set(got)) == len(got)
        # the retriever's scores are rank-bm25's (its own float32 arithmetic) ...
        np.testing.assert_allclose([p.score * factor for p in passages], b[got], rtol=1e-5, atol=1e-6)
        # ... and its list is a top 10 under rank-bm25's scores, in their order: the same score at every rank,
        # so a passage whose score no other passage has is at rank-bm25's rank exactly (counted: pinned)
        np.testing.assert_array_equal(b[got], b[ranked])
        alone = np.array([(b == b[i]).sum() == 1 for i in ranked])
        compared += len(got)
        unique += int(alone.sum())
        first_unique += int(alone[0])
    assert compared == TOP_K * len(questions)
    # The tie freedom, bounded: the share of compared positions whose passage is pinned (its score unique)
    # and the questions whose first passage is. The synthetic passages are templates: after the first one
    # or two, a question's matches tie by the dozen; SQuAD's paragraphs hardly ever tie.
    floor = {"kb": 0.19, "squad": 0.99}[corpus_name]
    assert unique >= floor * compared, (unique, compared)
    assert first_unique >= 0.99 * len(questions), (first_unique, len(questions))


def test_a_search_r1_episode_reads_and_scores(corpus):
    """Search-R1's format: ``<search>`` calls (the ``tag`` format), ``<information>`` observations, and an
    ``<answer>`` that ends the episode; the ``qa`` verifier reads it, gated by the format reward."""
    from rewardlab.verifiers.format.verifier import format_and_correct

    knowledge = kb.generate(40, seed=1)
    question, answer = knowledge.questions[0]["prompt"], knowledge.questions[0]["reference"]["target"][0]
    env = ToolEnv(["search"], formats=["tag"], tool_options={"search": {"corpus": str(corpus)}})
    assert env.stop == ["</search>"]
    state = env.reset(Record(id="q", prompt=question))
    (step,) = env.step([state], [f"<think>look it up</think><search>{question}</search>"], last=False)
    assert answer in step.observation
    (step,) = env.step([state], [f"<think>found</think><answer>{answer}</answer>"], last=False)
    assert step.done and step.end == "answer"
    reward = format_and_correct(correct="qa", require_think=False)
    reference = {"target": [answer]}
    assert (
        reward.score(
            Record(completion=f"<think>x</think><answer>{answer}</answer>", reference=reference)
        ).reward
        == 1
    )
    assert (
        reward.score(Record(completion=f"<answer>{answer}</answer> and more", reference=reference)).reward
        == 0
    )


# ----------------------------------------------------------------------------------------------------------
# rewardlab eval with the search tool
# ----------------------------------------------------------------------------------------------------------
class ScriptedSearcher:
    """Searches the question verbatim, then answers with the capital the first passage names (Search-R1's
    format); right on "What is the capital of X?", wrong on the others (which tells reading from retrieval)."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def generate(self, prompts, params):
        import re

        from rewardlab.generation.base import Generation

        out = []
        for prompt in prompts:
            ids = list(prompt) if isinstance(prompt, list) else self.tokenizer(prompt)["input_ids"]
            context = self.tokenizer.decode(ids)
            if "<information>" not in context:
                text = f"<search>{context.strip().splitlines()[-1]}</search>"
            else:
                found = re.search(r"capital is (\w+)", context.rsplit("<information>", 1)[1])
                text = f"<answer>{found.group(1) if found else 'unknown'}</answer>"
            tokens = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            out.append([Generation(text, tokens, ids, None, "stop") for _ in range(params.n)])
        return out


def test_eval_reports_exact_match_and_retrieval_recall(corpus, tmp_path, tiny_tokenizer):
    from rewardlab.envs import EnvConfig
    from rewardlab.eval import EvalConfig, GenerationConfig, load_benchmark
    from rewardlab.eval.runner import evaluate_backend

    questions = [q for q in kb.generate(40, seed=1).questions if q["hops"] == 1][
        :6
    ]  # capital, sea, birthplace
    bench_file = _write(
        tmp_path / "questions.jsonl", [{k: q[k] for k in ("id", "prompt", "reference")} for q in questions]
    )
    bench, problems = load_benchmark(str(bench_file), verifier="qa")
    template = "\n<information>{output}</information>\n"
    cfg = EnvConfig(
        name="tools",
        tools=["search"],
        formats=["tag"],
        max_turns=2,
        observation_format="text",
        observation_template=template,
        tool_options={"search": {"corpus": str(corpus), "k": 1}},
    )
    with ToolEnv(cfg.tools, formats=cfg.formats, tool_options=cfg.tool_options) as env:
        report = evaluate_backend(
            bench,
            problems,
            ScriptedSearcher(tiny_tokenizer),
            tiny_tokenizer,
            gen=GenerationConfig(
                n=1, temperature=0.0, max_new_tokens=64, batch_size=8, use_chat_template=False
            ),
            config=EvalConfig(workers=1, bootstrap=0),
            run_dir=tmp_path / "run",
            env=env,
            env_config=cfg,
        )
    metrics = report.summary["environment"]["metrics"]
    capitals = sum("capital" in q["prompt"] for q in questions)
    assert report.summary["metrics"]["pass@1"]["mean"] == pytest.approx(capitals / len(questions))
    assert metrics["answer_in_observations"] == 1.0  # every answer was retrieved; only capitals were read
    assert metrics["tool_calls"] == 1.0 and metrics["answered"] == 1.0
    assert "| answer_in_observations | 100.0% |" in (tmp_path / "run" / "report.md").read_text()
    # SQuAD's token F1 beside exact match: the capitals are right (1), the other answers share no token (0)
    assert report.summary["metrics"]["mean_f1"]["mean"] == pytest.approx(capitals / len(questions))
    assert "- mean token F1: " in (tmp_path / "run" / "report.md").read_text()


def test_eval_refuses_a_missing_index_before_loading_the_model(tmp_path, capsys):
    code = cli_main(
        ["eval", "--model", str(tmp_path / "no-model"), "--benchmark", "sample:gsm8k", "-o", str(tmp_path)]
        + ["--env", "tools", "--tools", "search", "--tool-option", f"search.index={tmp_path / 'none'}"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "no search index at" in err and len(err.strip().splitlines()) == 1, err


def test_retrieved_passages_carry_loss_mask_zero(corpus, tiny_tokenizer):
    """An episode's retrieved passages are observation tokens: loss mask 0 on exactly them, 1 on the model's
    search call and answer."""
    from rewardlab.envs import EnvConfig, run_episodes
    from rewardlab.generation import SamplingParams

    question = kb.generate(40, seed=1).questions[0]
    cfg = EnvConfig(
        name="tools",
        tools=["search"],
        formats=["tag"],
        max_turns=2,
        max_tokens=400,
        observation_format="text",
        observation_template="<information>{output}</information>",
    )
    record = Record(id="q", prompt=question["prompt"], reference=question["reference"])
    with ToolEnv(
        cfg.tools, formats=cfg.formats, tool_options={"search": {"corpus": str(corpus), "k": 1}}
    ) as env:
        (episode,) = run_episodes(
            ScriptedSearcher(tiny_tokenizer),
            env,
            [record],
            [record.prompt],
            SamplingParams(n=1),
            tiny_tokenizer,
            cfg,
        )[0]
    own = tiny_tokenizer.decode([t for t, m in zip(episode.token_ids, episode.loss_mask, strict=True) if m])
    seen = tiny_tokenizer.decode(
        [t for t, m in zip(episode.token_ids, episode.loss_mask, strict=True) if not m]
    )
    assert (
        own == f"<search>{question['prompt']}</search><answer>{question['reference']['target'][0]}</answer>"
    )
    assert seen.startswith("<information>Doc 1(Title: ") and seen.endswith("</information>")
    assert episode.summary()["answer_in_observations"] is True


def test_workers_that_build_at_once_keep_the_first_index(corpus, tmp_path):
    """open_retriever builds with replace=False: an index that appears while another is built is kept (a
    reader of it is never pulled from under), the later one dropped; the explicit build replaces."""
    index = build_index(corpus, tmp_path / "kb.bm25")
    (index / "first").write_text("")
    assert build_index(corpus, index, replace=False) == index
    assert (index / "first").exists()
    assert not list(tmp_path.glob(".*.partial"))
    build_index(corpus, index)
    assert not (index / "first").exists()
