"""Prompt metadata for curricula (rewardlab.data.metadata): difficulty and source read from a row's columns,
on records and through load_records (JSONL and a saved datasets folder)."""

from __future__ import annotations

import json
import math

import pytest

from rewardlab.data.loaders import load_records
from rewardlab.data.metadata import (
    DIFFICULTY_COLUMNS,
    SOURCE_COLUMNS,
    parse_difficulty,
    with_prompt_metadata,
)
from rewardlab.types import Record

MATH_ROWS = [
    {"problem": "1+1?", "solution": "\\boxed{2}", "level": "Level 4", "type": "Algebra"},
    {"problem": "2+2?", "solution": "\\boxed{4}", "level": "Level 1", "type": "Geometry"},
]
MATH_FIELDS = {"prompt": "problem", "reference": "solution"}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_default_columns():
    assert DIFFICULTY_COLUMNS == ("difficulty", "level")
    assert SOURCE_COLUMNS == ("source", "data_source", "category")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, 3.0),
        (2.5, 2.5),
        ("3", 3.0),
        (" 2.5 ", 2.5),
        ("Level 3", 3.0),
        ("level 5", 5.0),
        (None, None),
        ("", None),
    ],
)
def test_parse_difficulty(value, expected):
    assert parse_difficulty(value) == expected
    assert expected is None or type(parse_difficulty(value)) is float


@pytest.mark.parametrize("value", ["Level ?", "hard", "nan", math.nan, math.inf, "-inf", True, [3], {"a": 1}])
def test_parse_difficulty_refuses_what_is_not_a_number(value):
    with pytest.raises(ValueError, match="difficulty") as info:
        parse_difficulty(value)
    assert repr(value) in str(info.value) and "\n" not in str(info.value)


def test_math_style_rows_with_a_named_source():
    record = Record.from_dict(MATH_ROWS[0], field_map=MATH_FIELDS)
    out = with_prompt_metadata(record, source_field="type")
    assert out.metadata == {"level": "Level 4", "type": "Algebra", "difficulty": 4.0, "source": "Algebra"}
    assert record.metadata == {"level": "Level 4", "type": "Algebra"}  # the input record is not changed
    assert (out.prompt, out.reference) == (record.prompt, record.reference)


def test_default_columns_in_order():
    record = Record(id="r", metadata={"data_source": "gsm8k", "category": "x", "difficulty": 2, "level": "9"})
    assert with_prompt_metadata(record).metadata == {
        "data_source": "gsm8k",
        "category": "x",
        "difficulty": 2.0,
        "level": "9",
        "source": "gsm8k",
    }
    # a merged table's empty cells are skipped: the first default column with a value counts
    merged = Record(id="m", metadata={"difficulty": None, "level": "Level 2", "source": "", "category": 7})
    assert with_prompt_metadata(merged).metadata == {
        "level": "Level 2",
        "category": 7,
        "difficulty": 2.0,
        "source": "7",  # sources are strings
    }


def test_rows_without_metadata_get_no_keys():
    record = Record(id=1, metadata={"other": 1, "difficulty": None})
    assert with_prompt_metadata(record).metadata == {"other": 1}


def test_named_fields():
    record = Record(id="q7", metadata={"hardness": "2.5", "origin": 3, "difficulty": 9, "source": "s"})
    out = with_prompt_metadata(record, difficulty_field="hardness", source_field="origin")
    assert out.metadata == {"hardness": "2.5", "origin": 3, "difficulty": 2.5, "source": "3"}


def test_a_missing_named_field_is_an_error():
    record = Record(id="q7", metadata={"level": "Level 1"})
    with pytest.raises(ValueError, match=r"row id 'q7' has no column 'type' \(source_field\)"):
        with_prompt_metadata(record, source_field="type")
    with pytest.raises(ValueError, match=r"row id 'q7' has no column 'rating' \(difficulty_field\)"):
        with_prompt_metadata(record, difficulty_field="rating")


def test_a_bad_difficulty_names_the_row_and_column():
    record = Record(id="q7", metadata={"level": "Level ?"})
    with pytest.raises(ValueError, match=r"^row id 'q7', column 'level': .*'Level \?'$"):
        with_prompt_metadata(record, difficulty_field="level")


def test_words_in_a_usual_column_are_no_difficulty_and_no_error():
    # LiveCodeBench-style "difficulty": "easy" must not stop a file from loading when nobody asked for it
    for metadata in ({"difficulty": "easy"}, {"level": "hard", "difficulty": 2}):
        out = with_prompt_metadata(Record(id="q7", metadata=metadata))
        assert "difficulty" not in out.metadata or out.metadata["difficulty"] == 2.0
    assert "difficulty" not in with_prompt_metadata(Record(id=1, metadata={"difficulty": "easy"})).metadata


def test_load_records_jsonl(tmp_path):
    path = write_jsonl(tmp_path / "math.jsonl", MATH_ROWS)
    records = load_records(path, field_map=MATH_FIELDS, source_field="type")
    assert [(r.id, r.metadata["difficulty"], r.metadata["source"]) for r in records] == [
        (0, 4.0, "Algebra"),
        (1, 1.0, "Geometry"),
    ]
    assert records[0].prompt == "1+1?" and records[0].reference == "\\boxed{2}"
    # without a named source, MATH rows have a difficulty (level) and no source
    assert [sorted(r.metadata) for r in load_records(path)] == [
        ["difficulty", "level", "problem", "solution", "type"]
    ] * 2


def test_load_records_data_source_column(tmp_path):
    rows = [{"prompt": "p", "data_source": "openai/gsm8k", "difficulty": 0.3}, {"prompt": "q"}]
    records = load_records(write_jsonl(tmp_path / "rows.jsonl", rows))
    assert [r.metadata for r in records] == [
        {"data_source": "openai/gsm8k", "difficulty": 0.3, "source": "openai/gsm8k"},
        {},
    ]


def test_load_records_errors_name_the_input_and_row(tmp_path):
    path = write_jsonl(tmp_path / "math.jsonl", [*MATH_ROWS, {"problem": "x", "level": "hard", "type": "t"}])
    with pytest.raises(ValueError, match=r"math\.jsonl, row 2: row id 2, column 'level': .*'hard'"):
        load_records(path, difficulty_field="level")
    assert "difficulty" not in load_records(path)[2].metadata  # the usual column: words are no difficulty
    with pytest.raises(ValueError, match=r"math\.jsonl, row 0: row id 0 has no column 'topic'"):
        load_records(path, source_field="topic")


def test_load_records_saved_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(MATH_ROWS).save_to_disk(str(tmp_path / "saved"))
    records = load_records(tmp_path / "saved", field_map=MATH_FIELDS, source_field="type")
    assert [(r.metadata["difficulty"], r.metadata["source"]) for r in records] == [
        (4.0, "Algebra"),
        (1.0, "Geometry"),
    ]
    # a column of numbers and a named difficulty
    rows = [
        {"prompt": "a", "rating": 1200, "category": "dp"},
        {"prompt": "b", "rating": 800, "category": "math"},
    ]
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "rated"))
    records = load_records(tmp_path / "rated", difficulty_field="rating")
    assert [(r.metadata["difficulty"], r.metadata["source"]) for r in records] == [
        (1200.0, "dp"),
        (800.0, "math"),
    ]
