"""Builds the json verifier's outside data from the official JSON-Schema-Test-Suite (MIT).

Reads, from a git mirror of https://github.com/json-schema-org/JSON-Schema-Test-Suite at a fixed commit,
the required test files of two drafts (``tests/draft2020-12/*.json`` and ``tests/draft7/*.json``, the
top-level files: ``optional/`` is left out) and every schema under ``remotes/`` (served to the tests as
``http://localhost:1234/<path>``, as the suite's README prescribes), and writes:

- ``tests/data/json_schema_suite/suite.json.gz``: ``{"commit", "source", "drafts": {draft: {file: groups}},
  "remotes": {uri: schema}}``, the groups exactly as the suite has them (``description``, ``schema``,
  ``tests``: ``description``, ``data``, ``valid``); deterministic (sorted keys, gzip mtime 0);
- ``tests/data/json_schema_suite/LICENSE``: the suite's licence text.

    .venv/bin/python bench/build_json_suite.py [--git-dir DIR] [--commit SHA]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "data" / "json_schema_suite"
DEFAULT_GIT_DIR = "/work/.mirror/json-schema-org+JSON-Schema-Test-Suite/repo"
COMMIT = "44401e0c046704b476ec9d2e2fccdaee618f259d"
SOURCE = "https://github.com/json-schema-org/JSON-Schema-Test-Suite"
DRAFTS = ("draft2020-12", "draft7")
REMOTE_BASE = "http://localhost:1234/"


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True
    ).stdout


def _files(git_dir: str, commit: str, folder: str, recursive: bool) -> list[str]:
    flags = ["-r"] if recursive else []
    listing = _git(git_dir, "ls-tree", *flags, "--name-only", commit, f"{folder}/")
    return sorted(path for path in listing.splitlines() if path.endswith(".json"))


def _load(git_dir: str, commit: str, path: str) -> object:
    return json.loads(_git(git_dir, "show", f"{commit}:{path}"))


def build(git_dir: str, commit: str) -> dict:
    drafts = {
        draft: {
            Path(path).name: _load(git_dir, commit, path)
            for path in _files(git_dir, commit, f"tests/{draft}", recursive=False)
        }
        for draft in DRAFTS
    }
    remotes = {
        REMOTE_BASE + path.removeprefix("remotes/"): _load(git_dir, commit, path)
        for path in _files(git_dir, commit, "remotes", recursive=True)
    }
    return {"commit": commit, "source": SOURCE, "drafts": drafts, "remotes": remotes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", default=DEFAULT_GIT_DIR)
    parser.add_argument("--commit", default=COMMIT)
    args = parser.parse_args()
    suite = build(args.git_dir, args.commit)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(suite, sort_keys=True, ensure_ascii=False).encode()
    with open(OUT_DIR / "suite.json.gz", "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(payload)
    (OUT_DIR / "LICENSE").write_text(_git(args.git_dir, "show", f"{args.commit}:LICENSE"))
    cases = sum(len(g["tests"]) for files in suite["drafts"].values() for gs in files.values() for g in gs)
    print(
        f"{cases} cases in {sum(len(f) for f in suite['drafts'].values())} files, {len(suite['remotes'])} "
        f"remotes -> {OUT_DIR / 'suite.json.gz'} ({(OUT_DIR / 'suite.json.gz').stat().st_size:,} bytes)"
    )


if __name__ == "__main__":
    main()
