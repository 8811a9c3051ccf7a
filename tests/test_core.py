import subprocess
import sys

import pytest

from rewardlab import Record, Result
from rewardlab.registry import UnknownNameError
from rewardlab.verifiers import Verifier, get_verifier, register_verifier


def test_record_from_dict_keeps_unknown_fields_in_metadata():
    row = {"id": 3, "question": "1+1?", "completion": "2", "answer": "2", "level": 1}
    record = Record.from_dict(row, field_map={"prompt": "question", "reference": "answer"})
    assert record.prompt == "1+1?" and record.reference == "2" and record.id == 3
    assert record.metadata == {"level": 1}


def test_chat_completion_text_is_last_message():
    record = Record(completion=[{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}])
    assert record.completion_text == "b"


def test_verifier_never_raises():
    @register_verifier("_boom")
    class Boom(Verifier):
        def verify(self, record):
            raise ValueError("bad")

    result = get_verifier("_boom").score(Record(completion="x"))
    assert isinstance(result, Result) and result.reward == 0.0
    assert result.error.startswith("verifier error: ValueError: bad")


def test_unknown_verifier_lists_known_names():
    with pytest.raises(UnknownNameError, match="known: .*math"):
        get_verifier("nope")


def test_tiny_tokenizer_round_trips(tiny_tokenizer):
    text = "Q: 12 + 34 = ?\nA: \\boxed{46}"
    assert tiny_tokenizer.decode(tiny_tokenizer(text)["input_ids"]) == text


def test_tiny_model_loads_from_pretrained(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert model.config.vocab_size == len(tokenizer)


def test_cli_help_lists_subcommands():
    out = subprocess.run([sys.executable, "-m", "rewardlab.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for command in ("score", "rm", "rl", "eval"):
        assert command in out.stdout


def test_metadata_column_as_json_text_or_other_value():
    assert Record.from_dict({"metadata": '{"difficulty": "easy"}'}).metadata == {"difficulty": "easy"}
    assert Record.from_dict({"metadata": "plain"}).metadata == {"metadata": "plain"}
    assert Record.from_dict({"metadata": None, "level": 2}).metadata == {"level": 2}
