"""Task data: loaders for JSONL files and ``datasets`` datasets, and the small sample files the project ships.

Sample files live next to this module (``rewardlab.data``), so an installed copy finds them too.
"""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent


def sample_path(*parts: str) -> str:
    """Path of a shipped sample file, e.g. ``sample_path("math", "sample.jsonl")``."""
    return str(DATA_DIR.joinpath(*parts))
