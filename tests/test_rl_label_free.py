"""TTRL's majority-vote reward (``rewardlab.rl.label_free``): the pure vote and the RL reward source, on
hand-made groups (no model)."""

from __future__ import annotations

import pytest

from rewardlab.rl.label_free import MajorityVoteSource, majority_vote_rewards
from rewardlab.types import Record
from rewardlab.verifiers.math.verifier import MathVerifier


def _boxed(answer: str) -> str:
    return f"Working it out step by step, the answer is $\\boxed{{{answer}}}$."


def _records(answers: list[str | None], group: int | None = 0, prompt: str = "What is it?") -> list[Record]:
    """One record per answer (``None``: a completion without a box)."""
    meta = {} if group is None else {"group": group}
    return [
        Record(
            prompt=prompt, completion=_boxed(a) if a is not None else "I am not sure.", metadata=dict(meta)
        )
        for a in answers
    ]


# -- the pure vote ------------------------------------------------------------------------------------------
def test_clear_majority():
    rewards, labels, shares = majority_vote_rewards(["4", "4", "5", "4"], [0, 0, 0, 0])
    assert rewards == [1.0, 1.0, 0.0, 1.0]
    assert labels == ["4"] * 4
    assert shares == [0.75] * 4


def test_equivalent_forms_vote_together():
    answers = ["0.5", "1/2", "\\frac{1}{2}", "3", "3"]
    rewards, labels, shares = majority_vote_rewards(answers, [0] * 5)
    assert rewards == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert labels[0] in ("0.5", "1/2", "\\frac{1}{2}")
    assert shares == [0.6] * 5


def test_missing_answers_get_zero_and_do_not_vote_but_count_in_the_share():
    rewards, labels, shares = majority_vote_rewards([None, "7", None, "7", "8"], [0] * 5)
    assert rewards == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert labels == ["7"] * 5
    assert shares == [0.4] * 5


def test_no_answers_at_all():
    assert majority_vote_rewards([None, None], ["g", "g"]) == ([0.0, 0.0], [None, None], [0.0, 0.0])


def test_tie_gives_no_label():
    # TTRL would keep the first-sampled of the tied answers; here a tie is doubt, so no sample is rewarded.
    rewards, labels, shares = majority_vote_rewards(["1", "2", "2", "1", None], [0] * 5)
    assert rewards == [0.0] * 5
    assert labels == [None] * 5
    assert shares == [0.4] * 5


def test_tie_after_equivalence():
    # "2/4" and "0.5" are one answer: 2 votes against 2 for "3".
    rewards, labels, _ = majority_vote_rewards(["2/4", "3", "0.5", "3"], [0] * 4)
    assert rewards == [0.0] * 4 and labels == [None] * 4


def test_min_share():
    answers = ["1", "1", "2", "3", None]  # "1" has 2 of 5 votes: share 0.4
    assert majority_vote_rewards(answers, [0] * 5, min_share=0.4)[0] == [1.0, 1.0, 0.0, 0.0, 0.0]
    rewards, labels, shares = majority_vote_rewards(answers, [0] * 5, min_share=0.5)
    assert rewards == [0.0] * 5 and labels == [None] * 5
    assert shares == [0.4] * 5  # the top share is still reported, to show why there is no label


def test_min_share_out_of_range():
    with pytest.raises(ValueError, match="min_share"):
        majority_vote_rewards(["1"], [0], min_share=1.5)
    with pytest.raises(ValueError, match="min_share"):
        MajorityVoteSource(min_share=-0.1)


def test_lengths_must_match():
    with pytest.raises(ValueError, match="group ids"):
        majority_vote_rewards(["1", "2"], [0])


def test_several_groups_interleaved():
    answers = ["1", "9", "1", "8", "2", "8", "1", None]
    groups = ["a", "b", "a", "b", "a", "b", "a", "b"]
    rewards, labels, shares = majority_vote_rewards(answers, groups)
    assert rewards == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    assert labels == ["1", "8"] * 4
    assert shares == [0.75, 0.5] * 4


def test_custom_equivalence_and_crashing_equivalence():
    same_case = majority_vote_rewards(
        ["A", "a", "b"], [0] * 3, equivalent=lambda x, y: x.lower() == y.lower()
    )
    assert same_case[0] == [1.0, 1.0, 0.0]

    def broken(x: str, y: str) -> bool:
        raise RuntimeError("boom")

    # a comparison that crashes counts as "different": identical texts still vote together
    assert majority_vote_rewards(["x", "y", "x"], [0] * 3, equivalent=broken)[0] == [1.0, 0.0, 1.0]


# -- the reward source --------------------------------------------------------------------------------------
def test_source_rewards_and_details():
    source = MajorityVoteSource()
    results = source.score_batch(_records(["\\frac{1}{2}", "0.5", "1/2", "3", None]))
    assert [r.reward for r in results] == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert [r.details["correct"] for r in results] == [True, True, True, False, False]
    first = results[0].details
    assert first["extracted"] == "\\frac{1}{2}"
    assert first["pseudo_label"] in ("\\frac{1}{2}", "0.5", "1/2")
    assert first["vote_share"] == pytest.approx(0.6)
    assert first["group_size"] == 5
    missing = results[4]
    assert missing.details["extracted"] is None and missing.error.startswith("no answer found")
    assert results[3].error is None and "disagrees" in results[3].details["reason"]
    assert source.name == "ttrl"
    source.close()


def test_source_tie_and_min_share():
    tie = MajorityVoteSource().score_batch(_records(["1", "2"]))
    assert [r.reward for r in tie] == [0.0, 0.0]
    assert all(r.details["pseudo_label"] is None and not r.details["correct"] for r in tie)
    assert "tied" in tie[0].details["reason"]

    weak = MajorityVoteSource(min_share=0.6).score_batch(_records(["5", "5", "6", None]))
    assert [r.reward for r in weak] == [0.0] * 4
    assert weak[0].details["vote_share"] == 0.5 and "min_share" in weak[0].details["reason"]


def test_source_groups_interleaved_by_metadata():
    a, b = _records(["1", "1", "2"], group=0), _records(["7", "8", "8"], group=1)
    batch = [a[0], b[0], a[1], b[1], a[2], b[2]]
    results = MajorityVoteSource().score_batch(batch)
    assert [r.reward for r in results] == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    assert [r.details["pseudo_label"] for r in results] == ["1", "8"] * 3
    assert all(r.details["group_size"] == 3 for r in results)


def test_source_groups_by_prompt_without_metadata():
    p = _records(["3", "3", "4"], group=None, prompt="Problem P")
    q = _records(["4", "5", "5"], group=None, prompt="Problem Q")
    results = MajorityVoteSource().score_batch([p[0], q[0], p[1], q[1], p[2], q[2]])
    assert [r.reward for r in results] == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    assert [r.details["pseudo_label"] for r in results] == ["3", "5"] * 3


def test_source_refuses_retracted_and_cut_off_answers():
    records = _records(["9", "9", "2"])
    records.append(
        Record(prompt="What is it?", completion="So \\boxed{9}. Wait, that's wrong.", metadata={"group": 0})
    )
    records.append(Record(prompt="What is it?", completion="So \\boxed{9", metadata={"group": 0}))
    results = MajorityVoteSource().score_batch(records)
    assert [r.reward for r in results] == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert results[3].details["extracted"] is None and "refused" in results[3].details["reason"]
    assert results[3].error is None  # a refused answer scores 0 like the math verifier's, not an error
    assert results[4].error.startswith("no answer found")
    assert results[0].details["vote_share"] == pytest.approx(0.4)


def test_source_strict_mode_reads_boxes_only_and_auto_reads_more():
    records = [Record(prompt="Q", completion="The answer is 6.", metadata={"group": 0}) for _ in range(2)]
    assert [r.reward for r in MajorityVoteSource().score_batch(records)] == [0.0, 0.0]
    assert [r.reward for r in MajorityVoteSource(mode="auto").score_batch(records)] == [1.0, 1.0]


def test_source_never_raises_on_a_completion(monkeypatch):
    real = MathVerifier.read

    def flaky(self, text, *args, **kwargs):
        if "EXPLODE" in text:
            raise RecursionError("too deep")
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(MathVerifier, "read", flaky)
    records = _records(["4", "4"])
    records += [
        Record(prompt="What is it?", completion="EXPLODE \\boxed{4}", metadata={"group": 0}),
        Record(prompt="What is it?", completion=None, metadata={"group": 0}),
        Record(prompt="What is it?", completion="\\boxed{" * 500 + "}" * 499, metadata={"group": 0}),
        Record(
            prompt="What is it?",
            completion=[{"role": "assistant", "content": _boxed("4")}],
            metadata={"group": 0},
        ),
    ]
    results = MajorityVoteSource().score_batch(records)
    assert [r.reward for r in results] == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    crashed = results[2]
    assert crashed.error.startswith("extraction failed: RecursionError")
    assert crashed.details["extracted"] is None and "too deep" in crashed.details["reason"]
    assert results[0].details["group_size"] == 6


def test_the_source_table_knows_the_label_free_kinds_without_importing_them():
    """The TRL and verl integrations and the RL config check resolve names through rl/sources.py: it lists
    ``ttrl`` and ``self_certainty`` with lazy builders, so importing it loads neither this module nor
    math-verify; building a ``ttrl`` source in a run then does."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom rewardlab.rl.sources import build_source, known_sources\n"
        "import rewardlab.integrations.trl, rewardlab.integrations.verl\n"
        "print('ttrl' in known_sources() and 'self_certainty' in known_sources())\n"
        "loaded = lambda: sorted(m for m in ('rewardlab.rl.label_free', 'math_verify') if m in sys.modules)\n"
        "print(loaded())\nprint(type(build_source('ttrl', run={})).__name__, loaded())"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "True",
        "[]",
        "MajorityVoteSource ['math_verify', 'rewardlab.rl.label_free']",
    ]
