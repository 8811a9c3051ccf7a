"""docs/integrations.md quotes each example under docs/examples/ verbatim, so the page shows the code the
integration tests run (tests/test_integration_trl.py, test_integration_verl.py, test_serve.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
EXAMPLES = sorted((DOCS / "examples").glob("*.py"))


def test_there_are_examples():
    assert {p.name for p in EXAMPLES} >= {"trl_grpo.py", "verl_reward.py", "openrlhf_remote.py"}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_integrations_page_quotes_the_example_verbatim(example):
    page = (DOCS / "integrations.md").read_text(encoding="utf-8")
    assert f"```python\n{example.read_text(encoding='utf-8')}```" in page, (
        f"docs/integrations.md does not quote docs/examples/{example.name} as it is: paste the file again"
    )
