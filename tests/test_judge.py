"""LLM judge: verdict parsing (a table of well-formed and malformed outputs), templates, voting, soft scores,
end-to-end pointwise / pairwise judging with the tiny random model, and the rule-verifier fallback."""

from __future__ import annotations

import math

import pytest

from rewardlab.rewardmodels.judge import (
    FallbackVerifier,
    JudgeConfig,
    LLMJudge,
    parse_verdict,
    render,
    try_parse_verdict,
)
from rewardlab.rewardmodels.judge.judge import Judgment
from rewardlab.rewardmodels.judge.parse import Verdict, VerdictError
from rewardlab.types import Record, Result

# (kind, output, expected value or None for "no verdict", expected reason fragment)
PARSE_CASES = [
    ("score", "The answer is fine. Score: 7/10", 7.0, None),
    ("score", "**Score:** 8", 8.0, None),
    ("score", "Final score: [[6]]", 6.0, None),
    ("score", "Rating = 8.5", 8.5, None),
    ("score", "\\boxed{9}", 9.0, None),
    ("score", "so \\boxed{\\text{7/10}}.", 7.0, None),
    ("score", "Score: seven", 7.0, None),
    ("score", "Score = 7.5 out of 10", 7.5, None),
    ("score", "I'd say 3/10 at first. On reflection, Score: 5", 5.0, None),  # the last match wins
    ("score", "Score: 4\n...\nScore: 9/10", 9.0, None),
    ("score", "[[10]]", 10.0, None),
    ("score", "Overall 6/10", 6.0, None),
    ("score", "Score: 11/10", None, "outside"),  # out of range: malformed, not clipped
    ("score", "Score: 0", None, "outside"),
    ("score", "Score: 7/5", None, "not on the 1-10 scale"),
    ("score", "Score: 4. Then again \\boxed{12}", None, "outside"),  # the last one is malformed
    ("score", "Score: great", None, "no score verdict"),
    ("score", "no verdict here at all", None, "no score verdict"),
    ("score", "", None, "empty"),
    ("score", "   \n ", None, "empty"),
    ("score", "\\boxed{7", None, "no score verdict"),  # unbalanced brace: not a boxed verdict
    ("score", "Score:", None, "no score verdict"),
    ("binary", "Verdict: yes", "yes", None),
    ("binary", "**Final verdict**: No.", "no", None),
    ("binary", "Judgement: incorrect", "no", None),
    ("binary", "Correct: true", "yes", None),
    ("binary", "\\boxed{Yes}", "yes", None),
    ("binary", "[[no]]", "no", None),
    ("binary", "Verdict: yes\nHmm, wait. Verdict: no", "no", None),
    ("binary", "Verdict: maybe", None, "not a yes/no"),
    ("binary", "The answer is correct.", None, "no binary verdict"),
    ("binary", "Verdict:", None, "no binary verdict"),
    ("pairwise", "Verdict: A", "A", None),
    ("pairwise", "[[B]]", "B", None),
    ("pairwise", "Better response: Response B", "B", None),
    ("pairwise", "Final verdict: Assistant A", "A", None),
    ("pairwise", "The winner is: B", "B", None),
    ("pairwise", "Verdict: [[C]]", "tie", None),
    ("pairwise", "Verdict: tie", "tie", None),
    ("pairwise", "\\boxed{A}", "A", None),
    ("pairwise", "Verdict: A ... wait, Verdict: B", "B", None),
    ("pairwise", "Verdict: Z", None, "not an A/B"),
    ("pairwise", "Both are good.", None, "no pairwise verdict"),
    ("pairwise", "\x00\x01garbage", None, "no pairwise verdict"),
]


@pytest.mark.parametrize(("kind", "text", "expected", "reason"), PARSE_CASES)
def test_parse_verdict_table(kind, text, expected, reason):
    verdict, error = try_parse_verdict(text, kind)
    if expected is None:
        assert verdict is None
        assert reason in error
        with pytest.raises(VerdictError):
            parse_verdict(text, kind)
    else:
        assert error is None
        assert verdict.value == expected
        # The span points at the value as written, so its token probability can be found.
        assert text[verdict.start : verdict.end] == verdict.raw


def test_parse_ties_disallowed_and_custom_scale():
    assert try_parse_verdict("Verdict: tie", "pairwise", allow_tie=False)[0] is None
    assert parse_verdict("Score: 4/5", "score", scale=(1, 5)).value == 4.0
    assert try_parse_verdict("Score: 7/10", "score", scale=(1, 5))[0] is None


def test_render_leaves_braces_alone():
    text = render(
        "Q: {prompt}\nA: {response}\n\\boxed{} {reference_block}", prompt="1+{x}", response="{reference}"
    )
    assert text == "Q: 1+{x}\nA: {reference}\n\\boxed{} "
    with_ref = render("{reference_block}", reference="42")
    assert "42" in with_ref


def _judgment(value, kind="binary", prob=None, swapped=False):
    verdict = Verdict(kind=kind, value=value, start=0, end=1, pattern="label", raw=str(value))
    return Judgment(text=str(value), verdict=verdict, value=value, verdict_prob=prob, swapped=swapped)


def _bare_judge(**cfg):
    judge = LLMJudge.__new__(LLMJudge)
    judge.config = JudgeConfig(**cfg)
    return judge


def test_majority_vote_binary_and_ties():
    judge = _bare_judge(mode="binary", k=3)
    res = judge.decide([_judgment("yes"), _judgment("no"), _judgment("yes"), Judgment(text="??", error="x")])
    assert res.error is None and res.reward == 1.0
    assert res.details["verdict"] == "yes" and res.details["n_parsed"] == 3 and res.details["n_samples"] == 4
    tie = judge.decide([_judgment("yes"), _judgment("no")])
    assert tie.reward == 0.5 and tie.details["verdict"] == "tie"


def test_majority_vote_scores_and_mean():
    judge = _bare_judge(mode="score", k=5)
    votes = [_judgment(v, "score") for v in (7.0, 7.0, 3.0, 9.0, 9.0)]
    res = judge.decide(votes)
    # 7 and 9 tie on count; the mean is 7.0, so 7 wins.
    assert res.details["verdict"] == 7.0 and res.reward == pytest.approx((7 - 1) / 9)
    mean = _bare_judge(mode="score", aggregate="mean").decide(votes)
    assert mean.details["score"] == pytest.approx(7.0)


def test_pairwise_vote_share_and_swap():
    judge = _bare_judge(mode="pairwise", k=2, swap=True)
    # A, A, and from the swapped order B was preferred as "A" -> mapped back to B already.
    res = judge.decide(
        [_judgment("A", "pairwise"), _judgment("A", "pairwise"), _judgment("B", "pairwise", swapped=True)]
    )
    assert res.details["verdict"] == "A" and res.reward == pytest.approx(2 / 3)


def test_all_unparseable_is_a_clean_error():
    judge = _bare_judge(mode="score", k=2)
    res = judge.decide([Judgment(text="blah", error="no score verdict found")] * 2)
    assert res.error.startswith("no verdict") and res.reward == 0.0
    assert res.details["outputs"] == ["blah", "blah"]


def test_soft_score_from_logprobs(tiny_tokenizer):
    from rewardlab.generation import Generation
    from rewardlab.rewardmodels.judge.judge import verdict_probability

    text = "ok. Verdict: no"
    ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    logprobs = [math.log(0.5)] * len(ids)
    logprobs[-2], logprobs[-1] = math.log(0.8), math.log(0.5)  # "n", "o"
    gen = Generation(text=text, token_ids=ids, prompt_token_ids=[], logprobs=logprobs, finish_reason="stop")
    verdict = parse_verdict(text, "binary")
    assert verdict_probability(tiny_tokenizer, ids, logprobs, verdict) == pytest.approx(0.4)

    judge = _bare_judge(mode="binary", reward_from="soft")
    judge.tokenizer = tiny_tokenizer
    judgment = judge._parse(gen, swapped=False)
    assert judgment.verdict_prob == pytest.approx(0.4)
    res = judge.decide([judgment])
    assert res.details["verdict"] == "no"
    assert res.details["soft_score"] == pytest.approx(0.6)  # P(yes) = 1 - P("no")
    assert res.reward == pytest.approx(0.6)


def test_pointwise_and_pairwise_end_to_end_with_tiny_model(tiny_model, tiny_tokenizer):
    records = [
        Record(prompt="What is 2+2?", completion="4"),
        Record(prompt="Name a color.", completion="blue"),
    ]
    judge = LLMJudge(
        tiny_model, tiny_tokenizer, mode="score", k=2, temperature=1.0, max_new_tokens=12, seed=0
    )
    results = judge.score_batch(records)
    assert len(results) == 2
    for res in results:
        assert isinstance(res, Result)
        # A random model almost never writes a verdict: that must be a clean error, never a crash.
        if res.error is not None:
            assert res.error.startswith("no verdict") and res.reward == 0.0
            assert len(res.details["outputs"]) == 2
        else:
            assert 0.0 <= res.reward <= 1.0

    pair = LLMJudge(tiny_model, tiny_tokenizer, mode="pairwise", swap=True, max_new_tokens=8)
    res = pair.compare("Which is bigger?", "10", "2")
    assert res.error is None or res.error.startswith("no verdict")
    assert res.details["n_samples"] == 2  # both orders judged
    missing = pair.score_batch([Record(prompt="x", completion="y")])[0]
    assert missing.error.startswith("judge input error")


def test_end_to_end_with_forced_verdict(tiny_model, tiny_tokenizer):
    """A backend whose model always writes a verdict: the full path parses, votes and gets soft scores."""
    from rewardlab.generation import Generation

    class Scripted:
        tokenizer = tiny_tokenizer

        def generate(self, prompts, params):
            out = []
            for p in prompts:
                text = "Looks right. Verdict: yes" if "2+2" in p else "Hmm. Verdict: no"
                ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
                gen = Generation(text, ids, [], [math.log(0.9)] * len(ids), "stop")
                out.append([gen] * params.n)
            return out

    judge = LLMJudge(config=JudgeConfig(mode="binary", k=3), backend=Scripted())
    res = judge.score_batch([Record(prompt="2+2?", completion="4"), Record(prompt="3+3?", completion="7")])
    assert [r.reward for r in res] == [1.0, 0.0]
    assert res[0].details["soft_score"] == pytest.approx(0.9**3)


def test_fallback_verifier_calls_judge_only_when_undecided(tiny_tokenizer):
    from rewardlab.generation import Generation

    class Primary:
        name = "math"

        def score_batch(self, records):
            out = []
            for r in records:
                if r.completion_text.isdigit():
                    out.append(
                        Result(reward=float(r.completion_text == r.reference), details={"parsed": True})
                    )
                else:
                    out.append(Result.failure("no answer found"))
            return out

    seen = []

    class Backend:
        tokenizer = tiny_tokenizer

        def generate(self, prompts, params):
            seen.extend(prompts)
            return [[Generation("Verdict: yes", [], [], None, "stop")] for _ in prompts]

    judge = LLMJudge(config=JudgeConfig(mode="binary", template="math_equivalence"), backend=Backend())
    fb = FallbackVerifier(primary=Primary(), judge=judge)
    records = [
        Record(prompt="1+1", completion="2", reference="2"),
        Record(prompt="1+1", completion="3", reference="2"),
        Record(prompt="half", completion="one half", reference="1/2"),
    ]
    res = fb.score_batch(records)
    assert [r.reward for r in res] == [1.0, 0.0, 1.0]
    assert [r.details["decided_by"] for r in res] == ["math", "math", "judge"]
    assert res[2].details["primary"]["error"] == "no answer found"
    assert len(seen) == 1 and "1/2" in seen[0] and "one half" in seen[0]


def test_fallback_judge_failure_keeps_both_reasons(tiny_tokenizer):
    from rewardlab.generation import Generation

    class Primary:
        name = "math"

        def score_batch(self, records):
            return [Result.failure("no answer found") for _ in records]

    class Backend:
        tokenizer = tiny_tokenizer

        def generate(self, prompts, params):
            return [[Generation("I cannot tell.", [], [], None, "stop")] for _ in prompts]

    fb = FallbackVerifier(primary=Primary(), judge=LLMJudge(mode="binary", backend=Backend()))
    res = fb.score(Record(prompt="q", completion="?", reference="1"))
    assert res.error.startswith("undecided: no answer found; judge: no verdict")
    assert res.details["decided_by"] is None


def test_judge_cli(tiny_model_dir, tmp_path, capsys):
    import json

    from rewardlab.cli import main

    data = tmp_path / "in.jsonl"
    rows = [
        {"prompt": "1+1?", "completion": "The answer is 2.", "reference": "2"},
        {"prompt": "1+1?", "completion": "two-ish", "reference": "2"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    rc = main(["rm", "judge", str(data), "-o", str(out), "--model", tiny_model_dir, "--k", "2",
               "--temperature", "1.0", "--max-new-tokens", "6", "--fallback-for", "math"])  # fmt: skip
    assert rc == 0
    res = [json.loads(line) for line in out.read_text().splitlines()]
    assert res[0]["details"]["decided_by"] == "math" and res[0]["reward"] == 1.0
    # The math verifier cannot read "two-ish"; the random judge cannot decide either: both reasons kept.
    assert res[1]["error"] is None or res[1]["error"].startswith("undecided")
    summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert summary["rows"] == 2
    assert main(["rm", "judge", str(data), "-o", str(out), "--model", tiny_model_dir, "--mode", "nope"]) == 2


def test_judge_cli_output_rows_keep_the_input_fields(tiny_model_dir, tmp_path, capsys):
    """`rm judge` writes rows as `rewardlab score` does: input fields kept, a malformed line an error row."""
    import json

    from rewardlab.cli import main

    data = tmp_path / "in.jsonl"
    rows = [
        {"prompt": "1+1?", "completion": "2", "reference": "2", "source": "a", "reward": 0.3},
        {"prompt": "2+2?", "completion": "4", "reference": "4", "source": "b", "verifier": "math"},
        {"prompt": "3+3?", "completion": "6", "reference": "6"},
    ]
    data.write_text(json.dumps(rows[0]) + "\nnot json\n" + "".join(json.dumps(r) + "\n" for r in rows[1:]))
    out = tmp_path / "out.jsonl"
    argv = ["rm", "judge", str(data), "-o", str(out), "--model", tiny_model_dir, "--k", "1",
            "--max-new-tokens", "4", "--limit", "3", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(got) == 3  # --limit counts input lines
    kept = dict(rows[0], input_reward=0.3)
    del kept["reward"]
    assert {k: got[0][k] for k in kept} == kept  # an input 'reward' is kept as 'input_reward'
    assert got[1]["error"] == "invalid JSON at line 2" and got[1]["prompt"] is None
    assert {k: got[2][k] for k in rows[1]} == rows[1]
    for row in (got[0], got[2]):
        assert {"reward", "details", "error"} <= set(row) and "votes" in row["details"]  # judged, not math
    summary = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert summary["rows"] == 3 and summary["errors"] >= 1
    # One more row: --resume keeps the three and judges the fourth.
    assert main([*argv[:-3], "--limit", "4", "--resume", "--no-progress"]) == 0
    prompts = [json.loads(line)["prompt"] for line in out.read_text().splitlines()]
    assert prompts == ["1+1?", None, "2+2?", "3+3?"]
