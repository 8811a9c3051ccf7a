"""A model name that is not there: one line and exit 2 from every command, saying why (tests of rewardlab.hub)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from http_servers import JSONHandler, serving  # tests/http_servers.py (pytest puts tests/ on the path)

from rewardlab.cli import main
from rewardlab.hub import ModelNotFoundError, check_model


@pytest.fixture
def offline(monkeypatch):
    """The hub switched off, as HF_HUB_OFFLINE=1 does (no network is tried)."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def test_local_model_folders(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    check_model(str(tmp_path / "model"))
    check_model("tiny:qwen2-tiny")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="folder with no model in it"):
        check_model(str(tmp_path / "empty"))
    (tmp_path / "file.bin").write_text("x")
    with pytest.raises(ModelNotFoundError, match="is a file, not a model folder"):
        check_model(str(tmp_path / "file.bin"))


@pytest.mark.parametrize("name", ["./missing", "/no/such/model", "a/b/c", "~/missing", "bad name!"])
def test_names_that_can_only_be_local(name):
    with pytest.raises(ModelNotFoundError, match=r"is not a local folder$"):
        check_model(name, what="policy")


def test_hub_name_while_offline(offline):
    with pytest.raises(ModelNotFoundError, match=r"runs/missing is not a local folder, and the hub is off"):
        check_model("runs/missing")


def _rows(tmp_path) -> str:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"prompt": "1+1", "completion": "2", "reference": "2"}) + "\n")
    return str(path)


@pytest.mark.parametrize(
    "argv",
    [
        ["rm", "eval", "--model", "runs/missing", "--data", "{data}"],
        ["rm", "score", "{data}", "-o", "{out}", "--model", "runs/missing"],
        ["rm", "train", "--model", "runs/missing", "--train-file", "{data}", "--output-dir", "{out}"],
        [
            "rm",
            "train",
            "--type",
            "prm",
            "--model",
            "runs/missing",
            "--train-file",
            "{data}",
            "--output-dir",
            "{out}",
        ],
        ["rm", "label-steps", "{data}", "-o", "{out}", "--policy", "runs/missing"],
        ["score", "{data}", "-o", "{out}", "--reward-model", "runs/missing"],
        ["rm", "judge", "{data}", "-o", "{out}", "--model", "runs/missing"],
        ["eval", "--model", "runs/missing", "--benchmark", "sample:gsm8k", "-o", "{out}"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_every_command_says_it_in_one_line(argv, tmp_path, capsys, offline):
    data, out = _rows(tmp_path), str(tmp_path / "out")
    code = main([a.format(data=data, out=out) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1, err
    assert "not found: runs/missing is not a local folder, and the hub is off" in err[0]
    assert not os.path.exists(out)


def test_benchmark_from_an_unreachable_hub(tmp_path, capsys, offline):
    code = main(["eval", "--model", "runs/missing", "--benchmark", "gsm8k", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "comes from the hub (openai/gsm8k)" in err[0] and "sample:gsm8k" in err[0]


class _FakeHub(JSONHandler):
    """The hub's answer for a repository that does not exist (404 with its error code), or a model's info."""

    def do_GET(self):  # noqa: N802 - the stdlib's name
        if self.path.startswith("/api/models/org/exists"):
            self.send_json(200, {"id": "org/exists", "siblings": []})
        else:
            self.send_json(404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"})


def test_online_hub_without_such_model(tmp_path):
    """Online: the hub is asked, and its 'repository not found' becomes the one line (a real HTTP server
    stands in for the hub through HF_ENDPOINT, in a child process so the endpoint is read at import)."""
    script = (
        "from rewardlab.hub import check_model\n"
        "check_model('org/exists')\n"
        "check_model('org/missing', what='reward model')\n"
    )
    with serving(_FakeHub) as url:
        env = {**os.environ, "HF_ENDPOINT": url, "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf")}
        proc = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
        )
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.endswith(
        "ModelNotFoundError: reward model not found: org/missing is neither a local folder nor a model on the hub"
    ), proc.stderr


def test_a_saved_checkpoint_keeps_the_tiny_tokenizers_spaces(tmp_path):
    """Beside a Qwen2 config, AutoTokenizer builds Qwen2Tokenizer from the saved files, whose pre-tokenizer
    drops the character-level vocabulary's spaces; load_tokenizer (the policy and eval loaders') does not."""
    from rewardlab.data.tiny import load_tiny_tokenizer, save_tiny_model
    from rewardlab.eval.generate import load_model
    from rewardlab.hub import load_tokenizer
    from rewardlab.rl.policy import load_policy

    folder = save_tiny_model(tmp_path / "ckpt")
    text = "Its capital is Quessa."
    expected = load_tiny_tokenizer()(text)["input_ids"]
    assert load_tokenizer(folder)(text)["input_ids"] == expected
    assert load_tokenizer(folder).decode(expected) == text
    assert load_model(folder, "hf")[1](text)["input_ids"] == expected
    assert load_policy(folder)[1](text)["input_ids"] == expected
