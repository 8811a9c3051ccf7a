"""A run's source-specific summaries: the scoring source's ``summary_tallies()`` hook, and eval's own rubric
tally, fed every scored sample; what they report goes into ``summary.json`` (``tallies``) and ``report.md``.

The hook is the one ``rewardlab score`` reads (:meth:`rewardlab.verifiers.Verifier.summary_tallies`: IFEval's
four accuracies), asked of what the source's name names: a verifier's class, or for another kind of source
name (``rubric``, ``judge``, ``http:URL``: :mod:`rewardlab.verifiers.sources`) the class its kind builds.
Rows carrying rubric criteria (``details["criteria"]``) get :class:`rewardlab.rewardmodels.judge.criteria.CriteriaTally`
under ``rubric``, unless the source's hook gives its own under that name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rewardlab.rewardmodels.judge.criteria import CriteriaTally
from rewardlab.verifiers.sources import source_class

RUBRIC = "rubric"
"""The name of the rubric tally in ``summary.json``'s ``tallies``."""


def hook_tallies(name: str) -> dict[str, Any]:
    """The source's own running summaries (``summary_tallies()``: ``key -> object`` with ``add(row)``,
    ``to_dict()`` and ``format()``); ``{}`` when it has none."""
    hook = getattr(source_class(name), "summary_tallies", None)
    if not callable(hook):
        return {}
    try:
        return dict(hook())
    except Exception:  # a summary never stops an evaluation
        return {}


def run_tallies(name: str) -> dict[str, Any]:
    """The tallies of a run scored by source ``name``: its hook's, and the rubric tally unless the hook has
    one under :data:`RUBRIC`."""
    tallies = hook_tallies(name)
    tallies.setdefault(RUBRIC, CriteriaTally())
    return tallies


def tally_rows(name: str, rows: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, str]]:
    """Feeds ``rows`` (dicts with ``details``, ``error``, ``reward``) to :func:`run_tallies`; returns what the
    tallies that have something to say report: ``(name -> to_dict(), name -> format())``. A tally with
    nothing to say (``format()`` empty: no row of its kind) is left out."""
    tallies = run_tallies(name)
    broken: set[str] = set()
    for row in rows:
        for key, tally in tallies.items():
            try:
                tally.add(row)
            except Exception:  # a summary never stops an evaluation: a tally that fails is left out
                broken.add(key)
    reported, lines = {}, {}
    for key, tally in tallies.items():
        try:
            text = "" if key in broken else tally.format()
            if text:
                reported[key], lines[key] = tally.to_dict(), text
        except Exception:  # as above
            continue
    return reported, lines


__all__ = ["RUBRIC", "hook_tallies", "run_tallies", "tally_rows"]
