"""`pip install rewardlab` with no extras: the light core (README "Install", pyproject.toml).

The wheel, built from this checkout and installed alone into a fresh venv (pip fetches the light dependencies
from PyPI, or its cache), scores rows of every verifier (math, code, SQL, IFEval with a ``language:``
instruction, choice, qa, json) and one file with ``--shape repetition_penalty``, evaluates completions,
answers ``rewardlab serve`` and ``rewardlab view`` requests and runs the TRL and verl reward functions; a
command that needs an extra stops with one line naming it. No step tries to import torch, transformers,
datasets, accelerate, scikit-learn or vllm: a ``sitecustomize`` on ``PYTHONPATH`` (in every process the
steps start, the scoring workers included) records each attempt with its stack.

The install's time and size (site-packages) are printed and written to ``install_figures.json`` in the
test's temporary folder. Slow: a minute or two, most of it pip.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

HEAVY = ("torch", "transformers", "datasets", "accelerate", "sklearn", "vllm")
"""Modules the light paths must never try to import."""

HEAVY_DISTRIBUTIONS = {
    "torch",
    "transformers",
    "datasets",
    "accelerate",
    "scikit-learn",
    "vllm",
    "tokenizers",
}
"""Distributions `pip install rewardlab` must not bring."""

GUARD = '''"""Records each attempt to import a heavy module (with its stack) in $REWARDLAB_GUARD_LOG."""
import os
import sys
import traceback

HEAVY = {heavy!r}


class _Guard:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
            stack = traceback.format_stack()[:-1]
            # nltk probes scikit-learn for its optional classifiers, and does without it
            if not (name.startswith("sklearn") and any("/nltk/" in line for line in stack)):
                with open(os.environ["REWARDLAB_GUARD_LOG"], "a") as log:
                    log.write(f"=== import {{name}} (pid {{os.getpid()}})\\n" + "".join(stack))
        return None  # the normal finders go on: absent here, so the import fails as it would anywhere


sys.meta_path.insert(0, _Guard())
'''


INTEGRATIONS = r"""
import json
import sys

from rewardlab.integrations.trl import reward_function
from rewardlab.integrations.verl import compute_score

f = reward_function("math", workers=1, timeout=10)
trl = f(prompts=["q", "q"], completions=["\\boxed{4}", "\\boxed{5}"], solution=["4", "4"])
f.close()
verl = compute_score("openai/gsm8k", "so #### 4", "4")["score"]
print(json.dumps({"trl": trl, "verl": verl, "heavy": [m for m in sys.modules if m in sys.argv[1:]]}))
"""
"""The TRL and verl reward functions on plain lists, in the light install."""


def _roots() -> dict[str, str]:
    """setup.py's ROOTS (package -> folder), read without running setup()."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "ROOTS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no ROOTS")


def _copy_sources(dest: Path) -> dict[str, str]:
    """The files a wheel is built from (pyproject, setup.py, README, the floors' folders), into ``dest``
    (a build in the checkout would leave build/ there, and a stale build/lib can carry deleted modules into
    the wheel). Returns each package file's name inside the wheel -> its path here."""
    dest.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    expected: dict[str, str] = {}
    for package, folder in _roots().items():
        source = ROOT / folder
        shutil.copytree(source, dest / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for path in source.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                wheel_name = package.replace(".", "/") + "/" + path.relative_to(source).as_posix()
                expected[wheel_name] = path.relative_to(ROOT).as_posix()
    return expected


def _directory_bytes(path: Path) -> int:
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class LightInstall:
    """The fresh venv, and the steps run in it with the import guard."""

    def __init__(self, venv: Path, work: Path, guard_dir: Path) -> None:
        self.venv, self.work = venv, work
        self.bin = venv / "bin"
        self.log = work / "guard.log"
        self.env = {
            k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
        }
        self.env.update(
            PATH=f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}",
            PYTHONPATH=str(guard_dir),
            REWARDLAB_GUARD_LOG=str(self.log),
            HF_HUB_OFFLINE="1",
            PYTHONUNBUFFERED="1",
        )

    def heavy_imports(self) -> str:
        text = self.log.read_text() if self.log.exists() else ""
        self.log.unlink(missing_ok=True)
        return text

    def assert_light(self, step: str) -> None:
        attempts = self.heavy_imports()
        assert not attempts, f"{step}: a heavy import was tried on a light path:\n{attempts[-6000:]}"

    def run(
        self, *args: str, step: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess:
        out = subprocess.run(
            list(args), cwd=self.work, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check:
            assert out.returncode == 0, (
                f"{step}: exit {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
            )
            self.assert_light(step)
        return out

    def rewardlab(self, *args: str, step: str, check: bool = True) -> subprocess.CompletedProcess:
        return self.run(str(self.bin / "rewardlab"), *args, step=step, check=check)

    def python(self, code: str, *, step: str) -> subprocess.CompletedProcess:
        return self.run(str(self.bin / "python"), "-c", code, step=step)

    def score(self, name: str, rows: list[dict], *flags: str) -> list[dict]:
        source = _write_jsonl(self.work / f"{name}.jsonl", rows)
        out = self.work / f"{name}.scored.jsonl"
        self.rewardlab("score", str(source), "-o", str(out), "--workers", "1", *flags, step=f"score {name}")
        scored = _read_jsonl(out)
        assert [r["id"] for r in scored] == [r["id"] for r in rows]
        return scored

    def server(self, *args: str, step: str) -> tuple[subprocess.Popen, str]:
        """Starts ``rewardlab ARGS --port 0`` and returns it with the URL it printed."""
        proc = subprocess.Popen(
            [str(self.bin / "rewardlab"), *args, "--port", "0"],
            cwd=self.work,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lines: list[str] = []
        found: list[str] = []

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                match = re.search(r"http://127\.0\.0\.1:\d+", line)
                if match and not found:
                    found.append(match.group(0))

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 120
        while not found and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if not found:
            proc.kill()
            raise AssertionError(f"{step}: no URL printed\n{''.join(lines)}")
        return proc, found[0]


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.status, response.read()


def _stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def test_the_light_install_scores_serves_and_evaluates_without_torch(tmp_path, capsys):
    # --- the wheel: every module and every data file of every floor, and no heavy requirement
    expected = _copy_sources(tmp_path / "src")
    dist = tmp_path / "dist"
    # with this venv's setuptools when it has one (no download); else pip fetches the build requirements
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-q", "-w", str(dist)]
    built = subprocess.run([*build, str(tmp_path / "src")], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, f"pip wheel failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    (wheel,) = dist.glob("rewardlab-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    missing = sorted(set(expected) - names)
    assert not missing, f"files of the checkout missing from the wheel: {missing[:20]}"
    for data_file in (
        "rewardlab/data/math/sample.jsonl",
        "rewardlab/data/sql/databases/concert_singer/concert_singer.sqlite",
        "rewardlab/data/tiny/tokenizer/tokenizer.json",
        "rewardlab/view/templates/base.html",
        "rewardlab/view/static/vendor/tabulator.min.js",
        "rewardlab/rl/configs/grpo.yaml",
    ):
        assert data_file in names
    core = [
        line.split(":", 1)[1].strip()
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist:") and "extra ==" not in line
    ]
    core_names = {re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0].lower() for req in core}
    assert core_names and not core_names & HEAVY_DISTRIBUTIONS, core_names

    # --- a fresh venv, the wheel alone: pip brings the light dependencies
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    start = time.perf_counter()
    pip = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True,  # pip's notes (this machine's index settings) would fill the log
        text=True,
        timeout=900,
    )
    install_seconds = time.perf_counter() - start
    assert pip.returncode == 0, (
        f"pip install of the wheel failed:\n{pip.stdout[-3000:]}\n{pip.stderr[-3000:]}"
    )
    pip_list = [python, "-m", "pip", "list", "--format", "json", "--disable-pip-version-check"]
    listed = subprocess.run(pip_list, check=True, capture_output=True, text=True)
    installed = {d["name"].lower() for d in json.loads(listed.stdout)}
    assert not installed & HEAVY_DISTRIBUTIONS, sorted(installed & HEAVY_DISTRIBUTIONS)
    purelib = [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    site_packages = Path(subprocess.run(purelib, check=True, capture_output=True, text=True).stdout.strip())
    figures = {
        "wheel_mb": round(wheel.stat().st_size / 2**20, 2),
        "install_seconds": round(install_seconds, 1),
        "site_packages_mb": round(_directory_bytes(site_packages) / 2**20, 1),
        "distributions": len(installed),
        "python": sys.version.split()[0],
    }
    (tmp_path / "install_figures.json").write_text(json.dumps(figures, indent=2))
    with capsys.disabled():
        print(f"\n[light install] {json.dumps(figures)} ({tmp_path / 'install_figures.json'})")

    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(GUARD.format(heavy=set(HEAVY)))
    work = tmp_path / "work"
    work.mkdir()
    lab = LightInstall(venv, work, guard)

    # the guard itself: an attempt is recorded, with its stack
    lab.run(str(lab.bin / "python"), "-c", "import torch", step="guard", check=False)
    assert "=== import torch" in lab.heavy_imports()

    # --- every verifier, from the installed package (its shipped SQL databases included)
    data = lab.python(
        "from rewardlab.data import sample_path; print(sample_path())", step="data"
    ).stdout.strip()
    assert Path(data, "math", "sample.jsonl").is_file()

    def rewards(rows: list[dict]) -> list[float]:
        assert all(r["error"] is None for r in rows), [r["error"] for r in rows]
        return [r["reward"] for r in rows]

    math_rows = [
        {"id": "right", "prompt": "15% of 240?", "completion": "So 36. $\\boxed{36}$", "reference": "36"},
        {"id": "wrong", "prompt": "15% of 240?", "completion": "It is \\boxed{38}", "reference": "36"},
    ]
    assert rewards(lab.score("math", math_rows, "--verifier", "math")) == [1.0, 0.0]
    test = {"test": "def check(candidate):\n    assert candidate(1, 2) == 3\n", "entry_point": "add"}
    code_rows = [
        {"id": "right", "prompt": "def add(a, b):\n", "completion": "    return a + b\n", "reference": test},
        {"id": "wrong", "prompt": "def add(a, b):\n", "completion": "    return a - b\n", "reference": test},
    ]
    assert rewards(lab.score("code", code_rows, "--verifier", "code")) == [1.0, 0.0]
    gold = {"db_id": "concert_singer", "query": "SELECT count(*) FROM singer"}
    sql_rows = [
        {"id": "right", "prompt": "How many singers?", "completion": "SELECT COUNT(*) FROM singer", "reference": gold},
        {"id": "wrong", "prompt": "How many singers?", "completion": "SELECT COUNT(*) FROM concert", "reference": gold},
    ]  # fmt: skip
    db_root = str(Path(data, "sql", "databases"))
    assert rewards(lab.score("sql", sql_rows, "--verifier", "sql", "--config", f"db_root={db_root}")) == [
        1.0,
        0.0,
    ]
    german = {"instruction_id_list": ["language:response_language"], "kwargs": [{"language": "de"}]}
    ifeval_rows = [
        {
            "id": "german",
            "prompt": "Answer in German.",
            "completion": "Das ist ein schöner Tag, und wir gehen heute in den Park spazieren.",
            "reference": german,
        },
        {
            "id": "english",
            "prompt": "Answer in German.",
            "completion": "This is a lovely day and we are going to the park for a walk.",
            "reference": german,
        },
    ]
    assert rewards(lab.score("ifeval", ifeval_rows, "--verifier", "ifeval")) == [1.0, 0.0]
    choice_rows = [
        {"id": "right", "prompt": "2? A) 1 B) 2", "completion": "The answer is (B).", "reference": "B"},
        {"id": "wrong", "prompt": "2? A) 1 B) 2", "completion": "Answer: A", "reference": "B"},
    ]
    assert rewards(lab.score("choice", choice_rows, "--verifier", "choice")) == [1.0, 0.0]
    qa_rows = [
        {"id": "right", "prompt": "Who sang it?", "completion": "James Brown", "reference": ["James Brown"]},
        {"id": "wrong", "prompt": "Who sang it?", "completion": "Elvis", "reference": ["James Brown"]},
    ]
    assert rewards(lab.score("qa", qa_rows, "--verifier", "qa")) == [1.0, 0.0]
    schema = {"schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}
    json_rows = [
        {"id": "right", "prompt": "JSON", "completion": '{"a": 1}', "reference": schema},
        {"id": "wrong", "prompt": "JSON", "completion": '{"a": "x"}', "reference": schema},
    ]
    assert rewards(lab.score("json", json_rows, "--verifier", "json")) == [1.0, 0.0]
    shaped_rows = [
        {"id": "plain", "completion": "So the answer is \\boxed{36}", "reference": "36"},
        {"id": "repetitive", "completion": "36 36 36 36 36 36 36 36 \\boxed{36}", "reference": "36"},
    ]
    plain, repetitive = rewards(
        lab.score("shaped", shaped_rows, "--verifier", "math", "--shape", "repetition_penalty")
    )
    assert plain == 1.0 and 0.0 < repetitive < 1.0

    # --- eval on completions made elsewhere (the shipped GSM8K sample: 27 and 17)
    _write_jsonl(
        work / "completions.jsonl",
        [{"problem_id": "0", "completions": ["#### 27", "#### 3"]}, {"problem_id": "1", "completions": ["#### 17"] * 2}],
    )  # fmt: skip
    lab.rewardlab(
        "eval", "--completions", "completions.jsonl", "--benchmark", "sample:gsm8k", "--limit", "2", "-o", "ev",
        step="eval --completions",
    )  # fmt: skip
    assert [r["reward"] for r in _read_jsonl(work / "ev" / "samples.jsonl")] == [1.0, 0.0, 1.0, 1.0]
    assert (work / "ev" / "pass_at_k.png").stat().st_size > 0
    summary = json.loads((work / "ev" / "summary.json").read_text())
    assert summary["metrics"]["pass@2"]["mean"] == 1.0

    # --- rewardlab serve: both protocols
    proc, url = lab.server("serve", "--verifier", "math", "--workers", "1", step="serve")
    try:
        answer = _post(f"{url}/score", {"records": [{"completion": "\\boxed{4}", "reference": "4"}]})
        assert [r["reward"] for r in answer["results"]] == [1.0], answer
        answer = _post(f"{url}/get_reward", {"query": ["q \\boxed{4}"], "prompts": ["q"], "labels": ["5"]})
        assert answer["rewards"] == [0.0], answer
    finally:
        assert _stop(proc) == 0
    lab.assert_light("serve")

    # --- rewardlab view of a scored file
    proc, url = lab.server("view", str(work / "math.scored.jsonl"), "--no-browser", step="view")
    try:
        status, page = _get(f"{url}/")  # redirects to the file's page
        assert status == 200 and b"math.scored.jsonl" in page
        status, body = _get(f"{url}/api/s/0/rows")
        assert status == 200 and b"wrong" in body
    finally:
        _stop(proc)
    lab.assert_light("view")

    # --- the TRL and verl reward functions, on plain lists
    script = work / "integrations.py"
    script.write_text(INTEGRATIONS)
    out = lab.run(str(lab.bin / "python"), str(script), *HEAVY, step="integrations")
    assert json.loads(out.stdout.splitlines()[-1]) == {"trl": [1.0, 0.0], "verl": 1.0, "heavy": []}

    # --- what needs an extra says so in one line (exit 2)
    (work / "table.parquet").write_bytes(b"PAR1")
    for args, extra in (
        (["rl", "train", "--preset", "grpo"], "rl"),
        (["eval", "--model", "tiny:qwen2-tiny", "--benchmark", "sample:gsm8k", "-o", "ev2"], "rl"),
        (["rm", "train", "--model", "m", "--train-file", "t.jsonl"], "rm"),
        (["score", "table.parquet", "-o", "t.out.jsonl", "--verifier", "math"], "data"),
        (["score", "math.jsonl", "-o", "r.out.jsonl", "--verifier", "math", "--engine", "ray"], "ray"),
        (["index", "build", "math.jsonl"], "search"),
    ):
        out = lab.rewardlab(*args, step=" ".join(args), check=False)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1, (args, out.stderr)
        assert f"needs the {extra} extra" in lines[0] and f"pip install 'rewardlab[{extra}]'" in lines[0], (
            lines
        )
    lab.heavy_imports()  # those looked for their extra's modules, as they should
