"""Shaping transforms by name, without torch: the registry, the base class, spec parsing and pipelines.

A pipeline is built here from CLI strings (``--shape clamp:-1,1``), YAML items or transforms; building
one imports only the transforms it names. The built-in transforms are lazy ``"module:Class"`` entries of
:data:`SHAPINGS`: the row-level ones (:mod:`.rows`: ``repetition_penalty``, ``cosine_length``) are plain
Python, the tensor ones (:mod:`.pipeline`) import torch, so a pipeline made only of row-level transforms is
built and run (``rewardlab score --shape repetition_penalty``, :func:`.results.shape_results`) on an
install without torch, and naming a tensor transform there is one line naming the extra to install.

Spec syntax (one string per ``--shape`` flag, or one item of a YAML list)::

    clamp:-1,1                        # positional arguments, in the order of the transform's fields
    clamp:lo=-1,hi=1                  # keyword arguments
    group_norm:scale_by_std=false
    length_penalty:weight=0.1
    weighted_sum:correctness=0.9,format=0.1
    clip+delta:eta=0.1                # Gao et al. Clip then Delta on per-step rewards

YAML items may also be mappings: ``{name: clamp, lo: -1, hi: 1}`` or ``{clamp: {lo: -1, hi: 1}}``.

Names: "clip" always means Gao et al.'s Clip of process rewards (``step_clip`` and ``clip+delta`` here,
``clip`` among the RL loop's :data:`STEP_SHAPINGS` modes); the interval clip is ``clamp``. The old spelling
``clip`` for the interval clip is refused with a message naming both (see :data:`RENAMED`).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from rewardlab.extras import require
from rewardlab.registry import Registry

if TYPE_CHECKING:
    from .pipeline import ShapingBatch

SHAPINGS: Registry[type[Shaping]] = Registry("shaping transform")
"""All pipeline transforms by name (``clamp``, ``group_norm``, ``delta``, ...); the built-ins are lazy
entries (:data:`BUILT_INS`)."""

BUILT_INS: dict[str, str] = {
    "clamp": "rewardlab.rewardmodels.shaping.pipeline:Clamp",
    "scale": "rewardlab.rewardmodels.shaping.pipeline:ScaleShift",
    "binarize": "rewardlab.rewardmodels.shaping.pipeline:Binarize",
    "weighted_sum": "rewardlab.rewardmodels.shaping.pipeline:WeightedSum",
    "group_norm": "rewardlab.rewardmodels.shaping.pipeline:GroupNorm",
    "whiten": "rewardlab.rewardmodels.shaping.pipeline:RunningWhiten",
    "length_penalty": "rewardlab.rewardmodels.shaping.pipeline:KimiLengthPenalty",
    "overlong_penalty": "rewardlab.rewardmodels.shaping.pipeline:OverlongPenalty",
    "overlong_filter": "rewardlab.rewardmodels.shaping.pipeline:OverlongFilter",
    "truncation": "rewardlab.rewardmodels.shaping.pipeline:Truncation",
    "cosine_length": "rewardlab.rewardmodels.shaping.rows:CosineLength",
    "repetition_penalty": "rewardlab.rewardmodels.shaping.rows:RepetitionPenalty",
    "length_budget": "rewardlab.rewardmodels.shaping.pipeline:LengthBudget",
    "step_clip": "rewardlab.rewardmodels.shaping.pipeline:GaoClip",
    "delta": "rewardlab.rewardmodels.shaping.pipeline:GaoDelta",
    "clip+delta": "rewardlab.rewardmodels.shaping.pipeline:GaoClipDelta",
    "progress_delta": "rewardlab.rewardmodels.shaping.pipeline:ProgressDelta",
    "min_form": "rewardlab.rewardmodels.shaping.pipeline:MinForm",
    "success_plus_steps": "rewardlab.rewardmodels.shaping.pipeline:SuccessPlusSteps",
}
"""The built-in transforms -> ``"module:Class"``: the row-level ones in :mod:`.rows` (plain Python), the
tensor ones in :mod:`.pipeline` (torch)."""

for _name, _where in BUILT_INS.items():
    SHAPINGS.register(_name, _where)


RENAMED: dict[str, str] = {
    "clip": "'clip' is ambiguous and no longer a shaping transform: use 'clamp' for the interval clip "
    "min(max(r, lo), hi), or 'step_clip' for Gao et al.'s Clip min(r_t - eta, 0) of per-step rewards",
}
"""Former transform names -> the error that says what to write instead."""

STEP_SHAPINGS: dict[str, str] = {
    "none": "none",
    "clip": "step_clip",
    "delta": "delta",
    "clip+delta": "clip+delta",
    "min_form": "min_form",
    "progress_delta": "progress_delta",
}
"""Process-reward modes for the RL loop (Gao et al.'s names): mode -> pipeline transform name. ``clip`` is
Gao's Clip ``min(r_t - eta, 0)`` (the ``step_clip`` transform); the interval clip is the ``clamp`` transform,
which is no mode here."""


class Shaping:
    """Base class of pipeline transforms: a dataclass of arguments and ``__call__(batch) -> batch``.

    ``level`` is ``"sample"``, ``"group"`` or ``"step"`` (documentation and step detection).
    """

    name: ClassVar[str] = "shaping"
    level: ClassVar[str] = "sample"
    renamed: ClassVar[dict[str, str]] = {}
    """Former argument names -> today's; a spec that uses one builds with a ``FutureWarning``."""
    normalizes_groups: ClassVar[bool] = False
    """Whether the transform centres or scales rewards by their group's statistics (see
    :func:`.pipeline.conflicts_with_estimator`)."""
    row_level: ClassVar[bool] = False
    """Whether each sample's result depends only on that sample's row (:class:`.rows.RowShaping`): a pipeline
    of such transforms runs without torch."""

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:  # pragma: no cover - abstract
        raise NotImplementedError

    def spec(self) -> str:
        args = ",".join(f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self))  # type: ignore[arg-type]
        return f"{self.name}:{args}" if args else self.name


def register(name: str, *, override: bool = False) -> Callable[[type[Shaping]], type[Shaping]]:
    """Class decorator: the transform ``name`` of pipelines and specs (a taken name needs ``override=True``)."""

    def decorator(cls: type[Shaping]) -> type[Shaping]:
        SHAPINGS.register(name, cls, override=override)
        cls.name = name  # only once the name is the class's
        return cls

    return decorator


# --------------------------------------------------------------------------------------------------
# parsing and pipelines
# --------------------------------------------------------------------------------------------------


def _parse_value(text: str) -> Any:
    import yaml

    text = text.strip()
    if text == "":
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_spec(spec: str) -> tuple[str, list[Any], dict[str, Any]]:
    """``"clip:-1,hi=1"`` -> ``("clip", [-1], {"hi": 1})``."""
    name, _, rest = spec.strip().partition(":")
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    if rest.strip():
        for part in rest.split(","):
            key, eq, value = part.partition("=")
            if eq:
                kwargs[key.strip()] = _parse_value(value)
            else:
                if kwargs:
                    raise ValueError(f"shaping spec {spec!r}: positional argument after a keyword one")
                args.append(_parse_value(part))
    return name.strip(), args, kwargs


def transform_class(name: str) -> type[Shaping]:
    """The transform registered as ``name``; a former name (:data:`RENAMED`) is a ``ValueError`` that says
    what to write instead, never the other transform. A built-in tensor transform without torch installed is
    a :class:`rewardlab.extras.MissingExtraError` (one line: ``pip install 'rewardlab[rl]'``)."""
    if name in RENAMED:
        raise ValueError(RENAMED[name])
    if BUILT_INS.get(name, "").startswith("rewardlab.rewardmodels.shaping.pipeline:"):
        # Its module imports torch: on an install without it, one line that names the extra.
        require("torch", extra="rl", what=f"the shaping transform {name!r}")
    return SHAPINGS.get(name)


def _read_spec(spec: str | dict[str, Any]) -> tuple[str, list[Any], dict[str, Any]]:
    """``(name, args, kwargs)`` of a CLI string or a YAML mapping."""
    if isinstance(spec, dict):
        spec = dict(spec)
        if "name" in spec:
            name = spec.pop("name")
            args, kwargs = [], spec
        elif len(spec) == 1:
            name, kwargs = next(iter(spec.items()))
            kwargs = dict(kwargs or {})
            args = []
        else:
            raise ValueError(f"shaping mapping needs a 'name' key or a single key, got {sorted(spec)}")
        return name, args, kwargs
    if isinstance(spec, str):
        return parse_spec(spec)
    raise TypeError(f"cannot build a shaping transform from {type(spec).__name__}")


def build_shaping(spec: str | dict[str, Any] | Shaping) -> Shaping:
    """One transform from a CLI string, a YAML mapping, or an existing instance."""
    if isinstance(spec, Shaping):
        return spec
    name, args, kwargs = _read_spec(spec)
    cls = transform_class(name)
    kwargs = _renamed_arguments(cls, kwargs)
    if dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls) if f.init]
        if len(args) > len(names):
            raise ValueError(f"{name} takes at most {len(names)} positional arguments ({', '.join(names)})")
        unknown = set(kwargs) - set(names)
        if unknown:
            raise ValueError(f"{name}: unknown argument(s) {sorted(unknown)} (known: {', '.join(names)})")
        positional = dict(zip(names[: len(args)], args, strict=True))
        twice = set(positional) & set(kwargs)
        if twice:
            raise ValueError(f"{name}: argument(s) {sorted(twice)} given twice")
        kwargs = {**positional, **kwargs}
        return cls(**kwargs)
    if args:
        raise ValueError(f"{name} takes only keyword arguments")
    return cls(**kwargs)


def _renamed_arguments(cls: type[Shaping], kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the transform's former argument names (``cls.renamed``) replaced, with a warning."""
    out = {}
    for key, value in kwargs.items():
        new = cls.renamed.get(key)
        if new is not None:
            warnings.warn(f"{cls.name}: argument {key!r} is now {new!r}", FutureWarning, stacklevel=3)
            if new in kwargs:
                raise ValueError(f"{cls.name}: {key!r} and {new!r} are the same argument, given twice")
        out[new or key] = value
    return out


@dataclass
class ShapingPipeline:
    """An ordered list of transforms; ``pipeline(batch)`` applies them in turn."""

    transforms: list[Shaping] = field(default_factory=list)

    def __call__(self, batch: ShapingBatch) -> ShapingBatch:
        for transform in self.transforms:
            batch = transform(batch)
        return batch

    @property
    def has_step_transforms(self) -> bool:
        return any(t.level == "step" for t in self.transforms)

    @property
    def row_level(self) -> bool:
        """Whether every transform is row-level (:class:`.rows.RowShaping`): the pipeline runs on rows,
        without torch (:func:`.rows.shape_row`)."""
        return all(t.row_level for t in self.transforms)

    def specs(self) -> list[str]:
        return [t.spec() for t in self.transforms]

    def __len__(self) -> int:
        return len(self.transforms)


def build_pipeline(specs: str | dict | Shaping | Iterable[str | dict | Shaping] | None) -> ShapingPipeline:
    """A pipeline from a list of specs (CLI strings, YAML mappings or transforms), or from one spec."""
    if specs is None:
        return ShapingPipeline([])
    if isinstance(specs, (str, dict, Shaping)):
        specs = [specs]
    return ShapingPipeline([build_shaping(s) for s in specs])


def step_shaping(mode: str, eta: float = 0.0) -> ShapingPipeline:
    """The RL loop's process-reward shaping by Gao et al.'s names: ``none``, ``clip``, ``delta``,
    ``clip+delta``, ``min_form``, ``progress_delta`` (see :data:`STEP_SHAPINGS`)."""
    if mode not in STEP_SHAPINGS:
        raise ValueError(f"unknown step shaping {mode!r} (known: {', '.join(STEP_SHAPINGS)})")
    name = STEP_SHAPINGS[mode]
    if name == "none":
        return ShapingPipeline([])
    if name in ("step_clip", "clip+delta"):
        return build_pipeline({"name": name, "eta": eta})
    return build_pipeline(name)
