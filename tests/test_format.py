"""Format verifier (R1 think/answer structure, regex rewards) and "format and correct" combinations."""

from __future__ import annotations

import json
import os
import pickle
import re

import pytest

from rewardlab.cli import main
from rewardlab.types import Record, Result
from rewardlab.verifiers import Verifier, get_verifier
from rewardlab.verifiers.format import CombinedVerifier, FormatVerifier, format_and_correct

GOOD = "<think>2 + 2 is 4.</think>\n<answer>4</answer>"
OPEN_R1_FORMAT = r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$"  # open-r1's format_reward pattern


def score(text: str, **config) -> Result:
    return FormatVerifier(**config).score(Record(completion=text))


@pytest.mark.parametrize(
    "text, failed",
    [
        (GOOD, []),
        ("  \n" + GOOD + "\n\n", []),
        ("<think></think><answer>x</answer>", []),
        ("Sure! " + GOOD, ["nothing before the first tag"]),
        (GOOD + " Hope this helps.", ["nothing after the answer"]),
        ("<think>a</think> so <answer>4</answer>", ["nothing between the blocks"]),
        ("<think>a</think><answer>  </answer>", ["answer not empty"]),
        ("<think>a</think><think>b</think><answer>4</answer>", ["one <think>", "one </think>"]),
        (
            "<think>a</think><answer>4</answer><answer>5</answer>",
            ["one <answer>", "one </answer>", "nothing after the answer"],
        ),
        ("<answer>4</answer><think>a</think>", ["tags in order"]),
        ("<think>a<answer>4</answer></think>", ["tags in order"]),
        ("<answer>4</answer>", ["one <think>", "one </think>", "tags in order"]),
        ("<think>never closed <answer>4</answer>", ["one </think>", "tags in order"]),
        ("just text", ["one <think>", "one </think>", "one <answer>", "one </answer>", "tags in order"]),
    ],
)
def test_think_answer_rules(text, failed):
    result = score(text)
    assert result.error is None
    assert result.reward == (1.0 if not failed else 0.0)
    # the named failures are reported (when blocks are missing, the later rules fail too)
    assert set(failed) <= set(result.details["failed"]), result.details["failed"]
    if not failed:
        assert result.details["failed"] == []


def test_options():
    assert score("Sure! " + GOOD).reward == 0.0
    assert score(" " + GOOD, allow_leading_whitespace=False).reward == 0.0
    assert score(GOOD + "\n", allow_trailing_whitespace=False).reward == 0.0
    assert score("<think>a</think> so <answer>4</answer>", allow_text_between=True).reward == 1.0
    assert score("<answer>4</answer>", require_think=False).reward == 1.0
    assert score("<think>a</think><answer>4</answer>", require_think=False).reward == 1.0
    assert score("<think>a<answer>4</answer>", require_think=False).reward == 0.0  # half a think block
    assert score("<think> </think><answer>4</answer>", nonempty_think=True).reward == 0.0
    assert score("<think>a</think><answer></answer>", nonempty_answer=False).reward == 1.0
    # custom tags
    assert (
        score("<reasoning>a</reasoning><final>4</final>", think_tag="reasoning", answer_tag="final").reward
        == 1.0
    )
    assert score(GOOD, think_tag="reasoning", answer_tag="final").reward == 0.0


def test_prefilled_think():
    # R1's chat template ends the prompt with "<think>\n": the completion starts inside the reasoning.
    assert score("I add.\n</think>\n<answer>4</answer>", think_prefilled=True).reward == 1.0
    again = score("<think>I add.</think><answer>4</answer>", think_prefilled=True)
    assert again.reward == 0.0 and again.details["failed"] == ["no <think> (prefilled)"]


def test_newline_layout_agrees_with_open_r1_regex():
    texts = [
        "<think>\na\n</think>\n<answer>\n4\n</answer>",
        "<think>a</think>\n<answer>\n4\n</answer>",
        "<think>\na\n</think><answer>\n4\n</answer>",
        "<think>\na\n</think>\n<answer>\n4\n</answer> extra",
        "<think>\nmulti\nline\n</think>\n<answer>\nx\n</answer>",
    ]
    pattern = re.compile(OPEN_R1_FORMAT, re.DOTALL | re.MULTILINE)
    for text in texts:
        ours = score(
            text, require_newlines=True, allow_leading_whitespace=False, allow_trailing_whitespace=False
        ).reward
        assert ours == (1.0 if pattern.match(text) else 0.0), text


def test_partial_reward_is_the_fraction_of_rules_met():
    full = score(GOOD, partial=True)
    assert full.reward == 1.0
    checks = len(full.details["checks"])
    r = score("<think>a</think><answer>4</answer> trailing", partial=True)
    assert r.reward == pytest.approx((checks - 1) / checks)
    assert len(r.details["checks"]) == checks
    nothing = score("plain", partial=True)
    assert nothing.reward == 0.0 and len(nothing.details["checks"]) == checks  # same denominator


def test_regex_mode():
    v = FormatVerifier(
        mode="regex", patterns=[OPEN_R1_FORMAT], flags=["DOTALL", "MULTILINE"], match="match", strip=False
    )
    assert v.score(Record(completion="<think>\na\n</think>\n<answer>\n4\n</answer>")).reward == 1.0
    assert v.score(Record(completion="<think>a</think><answer>4</answer>")).reward == 0.0
    weighted = FormatVerifier(
        mode="regex",
        match="search",
        patterns=[{"pattern": r"\\boxed\{", "weight": 3}, {"pattern": "Step 1", "weight": 1}],
    )
    r = weighted.score(Record(completion="Step 1: add. So \\boxed{4}."))
    assert r.reward == 1.0
    r = weighted.score(Record(completion="The answer is \\boxed{4}."))
    assert r.reward == 0.75 and r.details["failed"] == ["Step 1"]
    with pytest.raises(ValueError):
        FormatVerifier(mode="regex")
    with pytest.raises(ValueError):
        FormatVerifier(mode="regex", patterns=["x"], flags=["NOPE"])


def test_registry_chat_messages_and_pickle():
    v = get_verifier("format")
    chat = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": GOOD}]
    assert v.score(Record(completion=chat)).reward == 1.0
    assert v.extract_answer("<think>x</think><answer> 4 </answer>") == "4"
    assert v.extract_answer("no tags") is None
    clone = pickle.loads(pickle.dumps(FormatVerifier(think_tag="r")))
    assert (
        clone.cfg.think_tag == "r"
        and clone.score(Record(completion="<r>a</r><answer>4</answer>")).reward == 1.0
    )


# ------------------------------------------------------------------------------ format and correct
class ExactMatch(Verifier):
    """A stand-in correctness verifier for these tests: the completion equals the reference."""

    name = "exact"

    def verify(self, record: Record) -> Result:
        return Result(reward=float(record.completion_text.strip() == str(record.reference)))


def test_format_and_correct_gate_and_sum():
    gate = format_and_correct(ExactMatch())
    assert gate.score(Record(completion=GOOD, reference="4")).reward == 1.0
    assert gate.score(Record(completion=GOOD, reference="5")).reward == 0.0
    assert (
        gate.score(Record(completion="<answer>4</answer>", reference="4")).reward == 0.0
    )  # right, badly formatted
    r = gate.score(Record(completion=GOOD + " extra", reference="4"))
    assert r.reward == 0.0 and r.details["rewards"] == {"format": 0.0, "exact": 1.0}
    summed = format_and_correct(ExactMatch(), mode="sum", format_weight=0.5, correct_weight=1.0)
    assert summed.score(Record(completion=GOOD, reference="4")).reward == 1.5
    assert summed.score(Record(completion="<answer>4</answer>", reference="4")).reward == 1.0
    assert summed.score(Record(completion=GOOD, reference="5")).reward == 0.5
    # the correctness verifier sees the answer block only, unless told otherwise
    whole = format_and_correct(ExactMatch(), score_answer_only=False)
    assert whole.score(Record(completion=GOOD, reference="4")).reward == 0.0


def test_combined_modes_and_batches():
    fmt = FormatVerifier(partial=True)
    records = [Record(completion=GOOD, reference="4"), Record(completion="4", reference="4")]
    product = CombinedVerifier([fmt, ExactMatch()], mode="product", answer_from=0)
    assert [r.reward for r in product.score_batch(records)] == [1.0, 0.0]
    smallest = CombinedVerifier([fmt, ExactMatch()], mode="min")
    assert smallest.score_batch(records)[1].reward == 0.0
    with pytest.raises(ValueError):
        CombinedVerifier([fmt], mode="max")
    with pytest.raises(ValueError):
        CombinedVerifier([fmt, ExactMatch()], weights=[1.0])


def test_format_and_sql():
    db = os.path.join(
        os.path.dirname(__file__), "..", "data", "sql", "databases", "concert_singer", "concert_singer.sqlite"
    )
    both = format_and_correct("sql")
    ref = {"query": "SELECT count(*) FROM singer", "db": db}
    good = "<think>Count the rows.</think>\n<answer>\n```sql\nSELECT count(*) FROM singer\n```\n</answer>"
    assert both.score(Record(completion=good, reference=ref)).reward == 1.0
    r = both.score(
        Record(completion="<think>x</think><answer>SELECT count(*) FROM concert</answer>", reference=ref)
    )
    assert r.reward == 0.0 and r.details["rewards"]["format"] == 1.0


def test_format_with_correct_from_config(tmp_path):
    """``rewardlab score --verifier format --config correct=sql ...``: format and correct from the CLI."""
    db = os.path.join(
        os.path.dirname(__file__), "..", "data", "sql", "databases", "concert_singer", "concert_singer.sqlite"
    )
    ref = {"query": "SELECT count(*) FROM singer", "db": db}
    v = get_verifier("format", correct="sql", combine="sum", format_weight=0.5)
    good = "<think>x</think><answer>SELECT count(*) FROM singer</answer>"
    assert v.score(Record(completion=good, reference=ref)).reward == 1.5
    assert v.score_batch([Record(completion="SELECT count(*) FROM singer", reference=ref)])[0].reward == 0.0
    assert pickle.loads(pickle.dumps(v)).score(Record(completion=good, reference=ref)).reward == 1.5
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(json.dumps({"completion": good, "reference": ref}) + "\n")
    argv = ["score", str(src), "-o", str(out), "--verifier", "format", "--workers", "0", "--no-progress",
            "--config", "correct=sql", "--config", "combine=gate"]  # fmt: skip
    assert main(argv) == 0
    assert json.loads(out.read_text())["reward"] == 1.0


def test_docs_examples_run(monkeypatch, capsys):
    """Every python block of docs/format.md runs (from the repository root, as the docs assume)."""
    import re as _re

    root = os.path.join(os.path.dirname(__file__), "..")
    monkeypatch.chdir(root)
    with open(os.path.join(root, "docs", "format.md"), encoding="utf-8") as f:
        blocks = _re.findall(r"^```python\n(.*?)^```$", f.read(), _re.S | _re.M)
    assert blocks
    namespace: dict = {}
    for block in blocks:
        exec(block, namespace)
