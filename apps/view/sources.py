"""What the viewer can show, found under the path it was given.

- a **scored** file: JSONL rows from ``rewardlab score`` (or any JSONL whose rows have ``reward``);
- an **eval** run folder: ``samples.jsonl`` and ``summary.json`` from ``rewardlab eval``;
- an **rl** run folder: ``metrics.jsonl`` (and ``rollouts.jsonl``) from ``rewardlab rl train``;
- a folder holding several of these, at any depth (up to ``MAX_DEPTH``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.view.rows import is_row_file

MAX_DEPTH = 4
_SKIP = {"checkpoints", ".git", "__pycache__", "node_modules", ".venv"}


@dataclass(frozen=True)
class Source:
    """One thing to show: ``kind`` is ``scored``, ``eval`` or ``rl``; ``name`` is its path relative to the
    viewed path."""

    kind: str
    path: Path
    name: str


def kind_of_folder(folder: Path) -> str | None:
    """``eval`` or ``rl`` for a run folder, else ``None``."""
    if (folder / "samples.jsonl").is_file() and (folder / "summary.json").is_file():
        return "eval"
    if (folder / "metrics.jsonl").is_file() or (folder / "rollouts.jsonl").is_file():
        return "rl"
    return None


def discover(path: str | Path) -> list[Source]:
    """Every source under ``path`` (a file, a run folder, or a folder of them), in path order."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"{root} does not exist")
    if root.is_file():
        return [Source("scored", root, root.name)]
    kind = kind_of_folder(root)
    if kind:
        return [Source(kind, root, root.name or str(root))]
    found: list[Source] = []
    _walk(root, root, 0, found)
    return found


def _walk(root: Path, folder: Path, depth: int, found: list[Source]) -> None:
    for entry in sorted(folder.iterdir()):
        name = entry.relative_to(root).as_posix()
        if entry.is_dir() and entry.name not in _SKIP and not entry.name.startswith("."):
            kind = kind_of_folder(entry)
            if kind:
                found.append(Source(kind, entry, name))
            elif depth + 1 < MAX_DEPTH:
                _walk(root, entry, depth + 1, found)
        elif is_row_file(entry):
            found.append(Source("scored", entry, name))


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file as a dict; ``{}`` when it is missing or unreadable (a run still starting)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
