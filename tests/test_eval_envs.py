"""`rewardlab eval --env`: pass@k over multi-turn episodes (scripted policies, then the tiny model end to end)."""

import json
import re
import subprocess
import sys

import pytest

from rewardlab.envs import EnvConfig, ToolEnv
from rewardlab.eval import EvalConfig, GenerationConfig, load_benchmark
from rewardlab.eval.runner import evaluate_backend
from rewardlab.generation.base import Generation

PROBLEMS = [("mul", "123*456", "56088"), ("add", "1234+4321", "5555"), ("big", "99*101", "9999")]


class ScriptedPolicy:
    """Calls the calculator on the problem's expression (``tag`` format), then answers with the tool's
    output in a box; ``answers=False``: calls again every turn, never answering."""

    def __init__(self, tokenizer, answers: bool = True) -> None:
        self.tokenizer, self.answers, self.calls = tokenizer, answers, 0

    def generate(self, prompts, params):
        self.calls += 1
        out = []
        for prompt in prompts:
            ids = list(prompt) if isinstance(prompt, list) else self.tokenizer(prompt)["input_ids"]
            context = self.tokenizer.decode(ids)
            if self.answers and "</calculator>" in context:
                value = re.findall(r"\d+", context.rsplit("</calculator>", 1)[1])[-1]
                text = f"The calculator says {value}, so the answer is \\boxed{{{value}}}."
            else:
                expression = re.search(r"\d+\s*[*+]\s*\d+", context).group(0)
                text = f"<calculator>{expression}</calculator>"
            tokens = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            out.append([Generation(text, tokens, ids, None, "stop") for _ in range(params.n)])
        return out


class Refuses:
    """A backend that must not be called (every problem is in generations.jsonl already)."""

    def generate(self, prompts, params):
        raise AssertionError(f"generated again: {prompts}")


@pytest.fixture()
def arithmetic(tmp_path):
    path = tmp_path / "arith.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": i, "prompt": f"What is {e}?", "reference": a}) + "\n" for i, e, a in PROBLEMS
        )
    )
    return load_benchmark(str(path), verifier="math")


def _run(bench, problems, backend, tokenizer, run_dir, max_turns=3):
    cfg = EnvConfig(name="tools", tools=["calculator"], formats=["tag"], max_turns=max_turns)
    with ToolEnv(cfg.tools, formats=cfg.formats) as env:
        return evaluate_backend(
            bench,
            problems,
            backend,
            tokenizer,
            gen=GenerationConfig(n=2, temperature=1.0, max_new_tokens=64, batch_size=2),
            config=EvalConfig(workers=1, bootstrap=0),
            run_dir=run_dir,
            env=env,
            env_config=cfg,
        )


def test_episodes_are_scored_on_their_answer_and_resume(arithmetic, tiny_tokenizer, tmp_path):
    bench, problems = arithmetic
    run_dir = tmp_path / "run"
    report = _run(bench, problems, ScriptedPolicy(tiny_tokenizer), tiny_tokenizer, run_dir)
    summary = report.summary
    assert summary["metrics"]["pass@1"]["mean"] == pytest.approx(1.0)
    assert summary["metrics"]["pass@2"]["mean"] == pytest.approx(1.0)
    env = summary["environment"]
    assert env["name"] == "tools" and env["num_episodes"] == 6
    metrics = env["metrics"]
    assert metrics["tool_call_rate"] == 1.0 and metrics["answered"] == 1.0 and metrics["end/answer"] == 1.0
    assert metrics["turns"] == 2.0 and metrics["tool_calls"] == 1.0 and metrics["tool_error_rate"] == 0.0
    assert metrics["observation_tokens"] > 0
    assert all(s.completion.endswith("\\boxed{" + s.answer + "}.") for s in report.samples)

    rows = [json.loads(line) for line in (run_dir / "generations.jsonl").read_text().splitlines()]
    assert [r["problem_id"] for r in rows] == [p[0] for p in PROBLEMS]
    episode = rows[0]["episodes"][0]
    assert episode["transcript"].startswith("<calculator>123*456</calculator>")
    assert "56088" in episode["transcript"] and episode["transcript"].endswith("\\boxed{56088}.")
    assert episode["turns"] == 2 and episode["tool_calls"] == 1 and episode["tool_errors"] == {}
    assert episode["end"] == "answer" and rows[0]["completions"][0].endswith("\\boxed{56088}.")
    assert "## Environment" in (run_dir / "report.md").read_text()
    assert json.loads((run_dir / "summary.json").read_text())["environment"]["metrics"] == metrics

    # resumed: nothing is generated again, and the environment metrics come back from the file
    again = _run(bench, problems, Refuses(), tiny_tokenizer, run_dir)
    assert again.summary["environment"]["metrics"] == pytest.approx(metrics)
    assert again.summary["metrics"]["pass@1"] == summary["metrics"]["pass@1"]
    # an interrupted run generates only the problems missing from the file
    lines = (run_dir / "generations.jsonl").read_text().splitlines()
    (run_dir / "generations.jsonl").write_text("\n".join(lines[:2]) + "\n")
    policy = ScriptedPolicy(tiny_tokenizer)
    resumed = _run(bench, problems, policy, tiny_tokenizer, run_dir)
    assert policy.calls == 2  # two turns of the one missing problem
    assert resumed.summary["environment"]["num_episodes"] == 6
    assert resumed.summary["metrics"]["pass@1"]["mean"] == pytest.approx(1.0)


def test_an_episode_that_never_answers_scores_zero(arithmetic, tiny_tokenizer, tmp_path):
    bench, problems = arithmetic
    report = _run(bench, problems, ScriptedPolicy(tiny_tokenizer, answers=False), tiny_tokenizer, tmp_path, 2)
    assert report.summary["metrics"]["pass@1"]["mean"] == 0.0
    metrics = report.summary["environment"]["metrics"]
    assert metrics["answered"] == 0.0 and metrics["end/max_turns"] == 1.0 and metrics["tool_call_rate"] == 1.0
    assert all(s.completion.startswith("<calculator>") and not s.correct for s in report.samples)
    row = json.loads((tmp_path / "generations.jsonl").read_text().splitlines()[0])
    assert [e["end"] for e in row["episodes"]] == ["max_turns"] * 2


def test_cli_env_run_with_the_tiny_model(tmp_path, tiny_model_dir, capsys):
    from rewardlab.cli import main

    run = tmp_path / "run"
    flags = "--limit 2 --n 2 --max-new-tokens 8 --workers 1 --bootstrap 0 --env tools --tools calculator"
    argv = ["eval", "--model", str(tiny_model_dir), "--benchmark", "sample:gsm8k", "-o", str(run)]
    code = main([*argv, *flags.split(), "--tool-format", "tag", "--max-turns", "2"])
    assert code == 0, capsys.readouterr().err
    for name in ("generations.jsonl", "samples.jsonl", "summary.json", "report.md", "pass_at_k.png"):
        assert (run / name).exists()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["environment"]["num_episodes"] == 4
    assert summary["environment"]["config"]["tools"] == ["calculator"]
    rows = [json.loads(line) for line in (run / "generations.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(len(row["episodes"]) == 2 for row in rows)
    assert "## Environment" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--env", "tools", "--tools", "calculator,nonesuch"], "unknown tool 'nonesuch'"),
        (["--env", "tools", "--max-turns", "0"], "--max-turns must be at least 1"),
        (["--env", "tools", "--tool-format", "xml"], "--tool-format: unknown ['xml']"),
        (["--env", "nonesuch"], "unknown environment 'nonesuch'"),
        (["--env", "no_such_module:Env"], "--env no_such_module:Env: ModuleNotFoundError"),
        (["--max-turns", "2"], "--max-turns needs --env"),
    ],
)
def test_cli_env_errors_are_one_line(tmp_path, capsys, flags, message):
    from rewardlab.cli import main

    # the model is never loaded: the environment is checked first
    code = main(
        [
            "eval",
            "--model",
            str(tmp_path / "no-model"),
            "--benchmark",
            "sample:gsm8k",
            "-o",
            str(tmp_path),
            *flags,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_cli_env_error_exits_2(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "rewardlab.cli", "eval", "--model", "unused", "--benchmark", "sample:gsm8k"]
        + ["-o", str(tmp_path), "--env", "tools", "--max-turns", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == "rewardlab eval: error: --max-turns must be at least 1, got 0"
