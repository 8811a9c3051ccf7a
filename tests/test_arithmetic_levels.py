"""Leveled arithmetic (rewardlab.data.arithmetic.levels): the worked solutions are right column by column,
and the levels are what a curriculum expects (shares, carries, digits, held-out set kept out, seeds)."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from rewardlab.data.arithmetic.levels import (
    LEVEL_SOURCES,
    generate_levels,
    heldout_levels,
    make_level_problem,
    worked_solution,
)

PROMPT = re.compile(r"(\d+)([+-])(\d+)=")
ADD_LINE = re.compile(r"(\d)\+(\d)(\+1)?=(\d+)( c1)?")
SUB_LINE = re.compile(r"(\d+)-(\d)(-1)?=(\d)( b1)?")


def check_solution(prompt: str, text: str) -> None:
    """Re-does the column arithmetic from the lines alone and checks every digit, carry and borrow."""
    a, op, b = PROMPT.fullmatch(prompt).groups()
    a, b = int(a), int(b)
    *lines, last = text.split("\n")
    assert len(lines) == max(len(str(a)), len(str(b))), text
    carry, written = 0, []
    for column, line in enumerate(lines):
        x, y = a // 10**column % 10, b // 10**column % 10  # the operands' digits in this column
        pattern = ADD_LINE if op == "+" else SUB_LINE
        match = pattern.fullmatch(line)
        assert match, f"line {column} of {prompt!r} is malformed: {line!r}"
        top, digit_b, carry_in, result, carry_out = match.groups()
        assert int(digit_b) == y and bool(carry_in) == bool(carry), (prompt, line)
        if op == "+":
            assert int(top) == x and int(result) == x + y + carry, (prompt, line)
            assert bool(carry_out) == (int(result) >= 10), (prompt, line)
            carry = int(result) // 10
            written.append(int(result) % 10)
        else:
            borrowed = int(top) - x  # 10 when the column borrows, else 0
            assert borrowed in (0, 10) and bool(carry_out) == (borrowed == 10), (prompt, line)
            assert int(result) == int(top) - y - carry, (prompt, line)
            assert (x - y - carry < 0) == (borrowed == 10), (prompt, line)
            carry = int(carry_out is not None)
            written.append(int(result))
    assert op == "+" or carry == 0, f"the last column of {prompt!r} borrows"
    value = int("".join(map(str, [carry, *reversed(written)])))  # the column digits, read as a number
    expected = a + b if op == "+" else a - b
    assert value == expected, (prompt, text)
    assert last == f"\\boxed{{{expected}}}" == f"\\boxed{{{eval(prompt[:-1])}}}", (prompt, last)


def all_one_digit_prompts() -> list[str]:
    adds = [f"{a}+{b}=" for a in range(10) for b in range(10)]
    return adds + [f"{a}-{b}=" for a in range(10) for b in range(a + 1)]


def test_worked_solution_examples():
    assert worked_solution(347, "+", 285) == "7+5=12 c1\n4+8+1=13 c1\n3+2+1=6\n\\boxed{632}"
    assert worked_solution(52, "-", 17) == "12-7=5 b1\n5-1-1=3\n\\boxed{35}"
    assert worked_solution(7, "+", 5) == "7+5=12 c1\n\\boxed{12}"
    assert worked_solution(1000, "-", 1000) == "0-0=0\n0-0=0\n0-0=0\n1-1=0\n\\boxed{0}"
    assert worked_solution(502, "-", 17) == "12-7=5 b1\n10-1-1=8 b1\n5-0-1=4\n\\boxed{485}"


@pytest.mark.parametrize("bad", [(3, "*", 4), (3, "-", 4), (-3, "+", 4), (3, "+-", 4)])
def test_worked_solution_refuses_what_it_cannot_solve(bad):
    with pytest.raises(ValueError):
        worked_solution(*bad)


def test_every_one_digit_solution_is_right():
    prompts = all_one_digit_prompts()
    assert len(prompts) == 155
    for prompt in prompts:
        a, op, b = PROMPT.fullmatch(prompt).groups()
        check_solution(prompt, worked_solution(int(a), op, int(b)))


def test_random_solutions_at_levels_2_to_4_are_right():
    rng = random.Random(7)
    for i in range(2000):
        row = make_level_problem(rng, 2 + i % 3)
        check_solution(row["prompt"], row["completion"])
        assert row["solution"] == row["completion"] and row["reference"] == str(eval(row["prompt"][:-1]))


def test_the_checker_catches_a_wrong_line():
    right = worked_solution(347, "+", 285)
    for wrong in (
        right.replace("4+8+1=13 c1", "4+8=12 c1"),  # a dropped carry
        right.replace("7+5=12 c1", "7+5=12"),  # an unmarked carry
        right.replace("632", "633"),
    ):
        with pytest.raises(AssertionError):
            check_solution("347+285=", wrong)
    with pytest.raises(AssertionError):
        check_solution("52-17=", "12-7=5 b1\n5-1=4\n\\boxed{35}")  # a borrow not taken


def test_rows_have_the_level_fields_and_digits():
    rows = generate_levels(200, seed=3)
    assert {tuple(row) for row in rows} == {
        ("id", "prompt", "reference", "completion", "solution", "difficulty", "source")
    }
    for row in rows:
        a, op, b = PROMPT.fullmatch(row["prompt"]).groups()
        digits = int(row["difficulty"])
        assert row["source"] == f"digits{digits}" and row["difficulty"] == float(digits)
        low = 0 if digits == 1 else 10 ** (digits - 1)
        assert all(low <= int(x) < 10**digits for x in (a, b)), row["prompt"]
        assert op == "+" or int(a) >= int(b)
        check_solution(row["prompt"], row["completion"])


def test_levels_are_interleaved_and_shared_equally():
    rows = generate_levels(100, seed=1)
    assert len({row["id"] for row in rows}) == len(rows) == 400
    assert Counter(row["source"] for row in rows) == dict.fromkeys(LEVEL_SOURCES, 100)
    for end in range(4, len(rows) + 1, 4):  # every prefix of whole rounds has every level equally
        assert Counter(row["source"] for row in rows[:end]) == dict.fromkeys(LEVEL_SOURCES, end // 4)
    assert [row["source"] for row in rows[:4]] == list(LEVEL_SOURCES)
    assert rows[0]["id"] == "lv1-1-0" and rows[4]["id"] == "lv1-1-1"
    assert {row["source"] for row in generate_levels(5, levels=(2, 4))} == {"digits2", "digits4"}


def needs_carry(prompt: str) -> bool:
    """Independent of the module: does some column carry (sum over 9) or borrow (digit too small)?"""
    a, op, b = PROMPT.fullmatch(prompt).groups()
    a, b = int(a), int(b)
    columns = [(a // 10**i % 10, b // 10**i % 10) for i in range(max(len(str(a)), len(str(b))))]
    # a carry (borrow) chain starts at a column whose own digits overflow (fall short)
    return any(x + y > 9 if op == "+" else x < y for x, y in columns)


@pytest.mark.parametrize("n", [1, 2, 7, 300])
def test_at_least_half_need_a_carry_from_level_2(n):
    for rows in (generate_levels(n, seed=n), heldout_levels(n)):
        for source in LEVEL_SOURCES[1:]:
            level = [row["prompt"] for row in rows if row["source"] == source]
            assert len(level) == n and sum(map(needs_carry, level)) >= n / 2, source
    # the levels differ in work, not only in length: carries get commoner with more digits
    big = generate_levels(500, seed=0)
    share = {s: sum(needs_carry(r["prompt"]) for r in big if r["source"] == s) / 500 for s in LEVEL_SOURCES}
    assert share["digits1"] < share["digits2"] < share["digits3"] <= share["digits4"]


def test_heldout_is_fixed_distinct_and_never_trained_on():
    held = heldout_levels()
    assert held == heldout_levels()
    counts = Counter(row["source"] for row in held)
    assert counts == {"digits1": 155 // 4, "digits2": 50, "digits3": 50, "digits4": 50}
    assert len({row["prompt"] for row in held}) == len(held)
    assert all(re.fullmatch(r"heldout-lv[1-4]-\d+", row["id"]) for row in held)
    assert heldout_levels(10)[:4] == held[:4]  # a smaller held-out set is a prefix of each level's
    banned = {row["prompt"] for row in held}
    for seed in range(3):
        rows = generate_levels(400, seed=seed)
        assert not banned & {row["prompt"] for row in rows}
    # level 1 keeps most of its 155 prompts for training
    trained = {r["prompt"] for r in generate_levels(2000, levels=(1,))}
    assert len(trained) == 155 - 38
    assert {r["prompt"] for r in heldout_levels(ops="+")} != {r["prompt"] for r in held}


def test_generation_is_deterministic_by_seed():
    assert generate_levels(30, seed=5) == generate_levels(30, seed=5)
    assert generate_levels(30, seed=5) != generate_levels(30, seed=6)
    # a level's problems do not depend on which other levels are drawn
    alone = [r["prompt"] for r in generate_levels(30, seed=5, levels=(3,))]
    assert alone == [r["prompt"] for r in generate_levels(30, seed=5) if r["source"] == "digits3"]


def test_ops_restrict_the_operators():
    assert {PROMPT.fullmatch(r["prompt"]).group(2) for r in generate_levels(50, ops="-")} == {"-"}
    with pytest.raises(ValueError, match="ops"):
        generate_levels(1, ops="*")
