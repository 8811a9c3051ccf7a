"""One config convention for every config of the project: dataclasses whose fields carry attribute docstrings,
loaded from defaults < preset < YAML file < ``--set a.b=value`` overrides, with every key and type checked on
load.

The RL run config is a tree of sections; the reward-model configs and the SFT warm start are flat; a reward
server's client settings (``http:`` sources) are one small class. The same functions load, override, dump
and document all of them; the fields every trainer shares are one base class a floor above
(:mod:`rewardlab.training.config`).

A config class renames a field through its ``DEPRECATED`` map (old name -> new name, or a :class:`Renamed`
that converts the value): the old name still loads from YAML, ``--set``, flags and keyword arguments, with a
``FutureWarning`` naming the new one (:class:`ConfigMeta` makes keyword arguments do so). Its ``UNSUPPORTED``
map names fields its trainer does not implement: any value but the default is refused on load, in one line.

A field declared with :func:`option` carries what its value must be (bounds, allowed values) on the field
itself, so that adding an option is one edit: :func:`check_fields` refuses a value outside them, naming the
dotted field, and :func:`field_docs` writes them into the field's documentation.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import json
import math
import textwrap
import types
import typing
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rewardlab.registry import lazy

C = TypeVar("C")


class ConfigError(ValueError):
    """A bad key or value in a config file or override."""


# ----------------------------------------------------------------------------------------------------------
# Renamed fields: one mechanism for every config class (its ``DEPRECATED`` map)
# ----------------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Renamed:
    """What an old field name became: ``new`` (a field, or a dotted path below the class that declares it),
    and ``convert`` when the value changes too (old value -> ``{new path: value}``)."""

    new: str
    convert: Callable[[Any], dict[str, Any]] | None = None
    when: Callable[[Any], bool] | None = None
    """Only values this accepts are the old spelling (a section's name given a string, where the section
    itself keeps the name: ``prompt_filter: band`` is ``prompt_filter: {mode: band}``)."""

    def values(self, old_value: Any) -> dict[str, Any]:
        return self.convert(old_value) if self.convert is not None else {self.new: old_value}

    def applies(self, old_value: Any) -> bool:
        return self.when is None or self.when(old_value)


_DEPRECATIONS: dict[type, dict[str, Renamed]] = {}


def deprecations(cls: type) -> dict[str, Renamed]:
    """Old name (or dotted path) -> :class:`Renamed`, from the ``DEPRECATED`` maps of ``cls`` and its bases."""
    if cls not in _DEPRECATIONS:
        merged: dict[str, Renamed] = {}
        for klass in reversed(cls.__mro__):
            for old, spec in vars(klass).get("DEPRECATED", {}).items():
                merged[old] = spec if isinstance(spec, Renamed) else Renamed(spec)
        _DEPRECATIONS[cls] = merged
    return _DEPRECATIONS[cls]


def unsupported(cls: type) -> dict[str, str]:
    """Base fields that ``cls``'s trainer does not implement -> why (its ``UNSUPPORTED`` map)."""
    return dict(getattr(cls, "UNSUPPORTED", {}))


def warn_renamed(where: str, old: str, new: str, stacklevel: int = 3) -> None:
    """``train.lr is deprecated: use train.learning_rate`` (``where``: the section, or a command's label)."""
    label, prefix = (f"{where}: ", "") if " " in where else ("", f"{where}." if where else "")
    message = f"{label}{prefix}{old} is deprecated: use {prefix}{new}"
    warnings.warn(message, FutureWarning, stacklevel=stacklevel)


def rename_deprecated(cls: type, values: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """``values`` (a mapping of ``cls``'s fields, nested sections included) with every deprecated name
    replaced by its new one, each with a ``FutureWarning``; an old and a new name both given is an error."""
    out = dict(values)
    if not dataclasses.is_dataclass(cls):
        return out
    for old, spec in deprecations(cls).items():
        *parents, leaf = old.split(".")
        node = out
        for part in parents:
            if not isinstance(node.get(part), Mapping):
                break
            node[part] = dict(node[part])
            node = node[part]
        else:
            if leaf not in node or not spec.applies(node[leaf]):
                continue
            value = node.pop(leaf)
            warn_renamed(where, old, spec.new, stacklevel=4)
            for new, new_value in spec.values(value).items():
                *new_parents, new_leaf = new.split(".")
                target = out
                for part in new_parents:
                    target[part] = dict(target.get(part) or {})
                    target = target[part]
                if new_leaf in target:
                    prefix = f"{where}." if where and " " not in where else ""
                    raise ConfigError(f"{prefix}{old} and {prefix}{new} both given: keep {prefix}{new}")
                target[new_leaf] = new_value
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        sub = hints.get(f.name)
        if dataclasses.is_dataclass(sub) and isinstance(out.get(f.name), Mapping):
            out[f.name] = rename_deprecated(sub, out[f.name], f"{where}.{f.name}".lstrip("."))
    return out


class ConfigMeta(type):
    """Old field names as keyword arguments: ``SFTConfig(lr=1e-3)`` is ``SFTConfig(learning_rate=1e-3)``,
    with a ``FutureWarning``."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if kwargs and deprecations(cls):
            renamed = deprecations(cls)
            for old in [k for k in kwargs if k in renamed and renamed[k].applies(kwargs[k])]:
                spec = renamed[old]
                warn_renamed("", old, spec.new)
                for new, value in spec.values(kwargs.pop(old)).items():
                    if new in kwargs:
                        raise TypeError(f"{old} and {new} both given: keep {new}")
                    kwargs[new] = value
        return super().__call__(*args, **kwargs)


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Converts ``value`` (from YAML or a string override) to the annotated type ``tp``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _coerce_union(value, tp, args, where)
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return build(tp, value, where)
    if origin in (list, tuple, dict) and isinstance(value, str):
        value = parse_literal(value)
    if origin is list:
        if not isinstance(value, (list, tuple)):
            value = [value]
        inner = args[0] if args else Any
        return [_coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            value = [value]
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], where) for v in value)
        return tuple(_coerce(v, a, where) for v, a in zip(value, args, strict=False))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    if tp in _SCALARS:
        return _SCALARS[tp](value, where)
    return value


def _coerce_union(value: Any, tp: Any, args: tuple[Any, ...], where: str) -> Any:
    is_null = value is None or (isinstance(value, str) and value.lower() in ("none", "null"))
    if is_null and type(None) in args:
        return None
    # A YAML/override value keeps its own type when the union allows it (``str | bool``: ``true`` is a bool).
    for arg in args:
        if arg in (bool, int, float) and type(value) is arg:
            return value
    for arg in args:
        if arg is type(None):
            continue
        try:
            return _coerce(value, arg, where)
        except (ConfigError, ValueError, TypeError):
            continue
    raise ConfigError(f"{where}: cannot read {value!r} as {tp}")


def _to_bool(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "1", "on"):
        return True
    if isinstance(value, str) and value.lower() in ("false", "no", "0", "off"):
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ConfigError(f"{where}: expected true/false, got {value!r}")


def _to_int(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected an integer, got {value!r}")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected an integer, got {value!r}") from None


def _to_float(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{where}: expected a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a number, got {value!r}") from None


def _to_str(value: Any, where: str) -> str:
    if isinstance(value, bool):  # YAML's spelling: ``bf16: true`` in a str field is "true", not "True"
        return "true" if value else "false"
    if not isinstance(value, (str, int, float)):
        raise ConfigError(f"{where}: expected a string, got {value!r}")
    return str(value)


_SCALARS: dict[Any, Callable[[Any, str], Any]] = {
    bool: _to_bool,
    int: _to_int,
    float: _to_float,
    str: _to_str,
}


def parse_literal(text: str) -> Any:
    """A command-line value read as YAML (numbers, booleans, lists, mappings, null)."""
    import yaml

    return yaml.safe_load(text)


def build(cls: type[C], values: Mapping[str, Any], where: str = "") -> C:
    """``cls(**values)`` with unknown keys refused and every value converted to its field's type (deprecated
    names read as their new ones)."""
    values = rename_deprecated(cls, values, where)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    unknown = set(values) - set(names)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(sorted(unknown))} in {where or 'config'} (known: {', '.join(sorted(names))})"
        )
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}".lstrip(".")) for k, v in values.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where or cls.__name__}: {exc}") from exc


def deep_update(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """Merges ``update`` into ``base`` in place (nested mappings merge, everything else replaces)."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_update(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def apply_override(tree: dict[str, Any], assignment: str) -> None:
    """Applies ``a.b.c=value`` (value parsed as YAML: numbers, booleans, lists, null) to a dict tree."""
    key, value = _parse_assignment(assignment)
    _assign(tree, key.split("."), value, assignment)


def _parse_assignment(assignment: str) -> tuple[str, Any]:
    if "=" not in assignment:
        raise ConfigError(f"override {assignment!r} is not KEY=VALUE")
    key, _, raw = assignment.partition("=")
    return key.strip(), parse_literal(raw) if raw.strip() else ""


def _assign(tree: dict[str, Any], parts: list[str], value: Any, assignment: str) -> None:
    node = tree
    for i, part in enumerate(parts[:-1]):
        if part not in node or not isinstance(node[part], dict):
            raise ConfigError(
                f"unknown config section {'.'.join(parts[: i + 1])!r} in override {assignment!r}"
            )
        node = node[part]
    if parts[-1] not in node:
        section = ".".join(parts[:-1]) or "config"
        raise ConfigError(f"unknown key {parts[-1]!r} in {section} (known: {', '.join(sorted(node))})")
    node[parts[-1]] = value


def _leaves(tree: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[list[str], Any]]:
    out: list[tuple[list[str], Any]] = []
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            out += _leaves(value, (*prefix, key))
        elif not isinstance(value, Mapping):
            out.append(([*prefix, key], value))
    return out


def _apply_renamed_override(cls: type, tree: dict[str, Any], assignment: str, where: str) -> None:
    """An override whose key may be a deprecated name: applied to the new name(s)."""
    key, value = _parse_assignment(assignment)
    parts = key.split(".")
    layer: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        layer = {part: layer}
    renamed = rename_deprecated(cls, layer, where)
    if renamed == layer:
        _assign(tree, parts, value, assignment)
        return
    for path, new_value in _leaves(renamed):
        _assign(tree, path, new_value, assignment)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping in a YAML or JSON config file."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        values = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}"
        ) from None
    values = values or {}
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of field: value")
    return values


def load(
    cls: type[C],
    *layers: Mapping[str, Any],
    overrides: list[str] | None = None,
    where: str = "",
) -> C:
    """``cls`` from its defaults, then each mapping of ``layers`` in order, then ``--set`` ``overrides``.

    Each layer is checked before the next applies, so a bad key names the layer (a file) it came from.
    """
    tree = dataclasses.asdict(cls())  # type: ignore[call-overload]
    for layer in layers:
        deep_update(tree, rename_deprecated(cls, layer, where))
        build(cls, tree, where)
    for assignment in overrides or []:
        _apply_renamed_override(cls, tree, assignment, where)
    return build(cls, tree, where)


def to_tree(config: Any) -> Any:
    """A config as plain data (``dataclasses.asdict``), without the fields its trainer does not support."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        skip = unsupported(type(config))
        return {
            f.name: to_tree(getattr(config, f.name)) for f in dataclasses.fields(config) if f.name not in skip
        }
    if isinstance(config, (list, tuple)):
        return [to_tree(v) for v in config]
    if isinstance(config, dict):
        return {k: to_tree(v) for k, v in config.items()}
    return copy.deepcopy(config)


def dump(config: Any, path: str | Path | None = None) -> str:
    """A config dataclass as YAML (written to ``path`` when given)."""
    import yaml

    text = yaml.safe_dump(json.loads(json.dumps(to_tree(config))), sort_keys=False)
    if path is not None:
        Path(path).write_text(text)
    return text


# ----------------------------------------------------------------------------------------------------------
# Options: what a field's value must be, declared on the field itself (adding an option is one edit)
# ----------------------------------------------------------------------------------------------------------
_OPTION = "rewardlab.option"


@dataclasses.dataclass(frozen=True)
class Check:
    """What a field's value must be: within the bounds (``ge``, ``gt``, ``le``, ``lt``; ``finite``: not inf
    or NaN) and one of ``choices`` (a sequence, or a callable read when the config is checked, such as a
    registry's ``names``). ``note`` explains a special value (``0: off``); ``must`` replaces the words the
    bounds would give. ``None`` passes (an optional field's "off"); a list is checked item by item."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    finite: bool = False
    note: str | None = None
    must: str | None = None
    choices: Sequence[Any] | Callable[[], Iterable[Any]] | None = None

    def allowed(self) -> list[Any] | None:
        """The allowed values (``None``: any)."""
        if self.choices is None:
            return None
        return list(self.choices() if callable(self.choices) else self.choices)

    @property
    def bounded(self) -> bool:
        bounds = (self.ge, self.gt, self.le, self.lt, self.must)
        return self.finite or any(b is not None for b in bounds)

    def in_range(self, value: Any) -> bool:
        # Each bound a comparison that holds, not a negated one that fails: NaN then passes none of them.
        return (
            (self.ge is None or value >= self.ge)
            and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le)
            and (self.lt is None or value < self.lt)
            and (not self.finite or math.isfinite(value))
        )

    def range_text(self) -> str:
        """The bounds in words: ``in [0, 1]``, ``at least 1``, ``> 0``, ``>= 0 (0: off)``."""
        if self.must is not None:
            return self.must
        low = self.ge if self.ge is not None else self.gt
        high = self.le if self.le is not None else self.lt
        if low is not None and high is not None:
            opening, closing = "[" if self.ge is not None else "(", "]" if self.le is not None else ")"
            text = f"in {opening}{low:g}, {high:g}{closing}"
        elif self.ge is not None:
            text = f"at least {self.ge:g}" if self.ge >= 1 else f">= {self.ge:g}"
        elif self.gt is not None:
            text = f"> {self.gt:g}"
        elif high is not None:
            text = f"{'<=' if self.le is not None else '<'} {high:g}"
        else:
            text = "a finite number"
        return f"{text} ({self.note})" if self.note else text

    def problem(self, value: Any, where: str) -> str | None:
        """The one-line error for ``value`` at the dotted field ``where``, or ``None`` if it passes."""
        allowed = self.allowed()
        for one in value if isinstance(value, list) else [value]:
            if one is None:
                continue
            if allowed is not None and one not in allowed:
                return f"{where}: unknown value {one!r} (known: {', '.join(map(str, allowed))})"
            if self.bounded and not self.in_range(one):
                return f"{where} must be {self.range_text()}, got {one!r}"
        return None

    def doc(self) -> str:
        """`` One of: ``a``, ``b``.`` and `` Must be in [0, 1].``, for the field's documentation."""
        allowed = self.allowed()
        text = f" One of: {', '.join(f'``{v}``' for v in allowed)}." if allowed else ""
        return text + (f" Must be {self.range_text()}." if self.bounded else "")


def option(
    default: Any = dataclasses.MISSING,
    *,
    default_factory: Any = dataclasses.MISSING,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    finite: bool = False,
    note: str | None = None,
    must: str | None = None,
    choices: Sequence[Any] | Callable[[], Iterable[Any]] | None = None,
) -> Any:
    """A dataclass field that carries what its value must be (a :class:`Check`), read by
    :func:`check_fields` and :func:`field_docs`::

        n: int = option(8, ge=1)                              # rollout.n must be at least 1, got 0
        top_p: float = option(1.0, gt=0, le=1)                # rollout.top_p must be in (0, 1], got 0
        top_k: int = option(0, ge=0, note="0: off")           # rollout.top_k must be >= 0 (0: off), got -1
        backend: str = option("hf", choices=BACKENDS.names)   # rollout.backend: unknown value 'x' (known: ...)
    """
    check = Check(ge=ge, gt=gt, le=le, lt=lt, finite=finite, note=note, must=must, choices=choices)
    return dataclasses.field(default=default, default_factory=default_factory, metadata={_OPTION: check})


def names_in(path: str, *first: Any) -> Callable[[], list[Any]]:
    """Allowed values read when a config is checked: ``first``, then the names in ``"module:attr"`` (a
    registry's names, or a collection's items). The module is imported only then: it may pull in torch, or
    sit on any floor (a string, not an import)."""

    def names() -> list[Any]:
        found = lazy(path)
        return [*first, *(found.names() if hasattr(found, "names") else found)]

    return names


def field_check(f: dataclasses.Field) -> Check | None:
    """The :class:`Check` an :func:`option` field carries (``None`` for a plain field)."""
    return f.metadata.get(_OPTION)


def check_fields(config: Any, where: str = "") -> None:
    """Raises :class:`ConfigError` for the first field of ``config`` (nested sections and lists of sections
    included, in declaration order) whose value its :func:`option` refuses, naming the dotted field:
    ``rollout.n must be at least 1, got 0``, ``rollout.backend: unknown value 'x' (known: hf, vllm)``."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        path = f"{where}.{f.name}" if where else f.name
        check = field_check(f)
        problem = check.problem(value, path) if check is not None else None
        if problem:
            raise ConfigError(problem)
        if _is_config(value):
            check_fields(value, path)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if _is_config(item):
                    check_fields(item, f"{path}[{i}]")


def _is_config(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def attribute_docs(cls: type) -> dict[str, str]:
    """Field -> its attribute docstring (the string literal right after the field), whitespace collapsed."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body  # type: ignore[attr-defined]
        for node, nxt in zip(body, body[1:], strict=False):
            is_field = isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            if (
                is_field
                and isinstance(nxt, ast.Expr)
                and isinstance(getattr(nxt, "value", None), ast.Constant)
            ):
                docs[node.target.id] = " ".join(str(nxt.value.value).split())
    return docs


def field_docs(cls: type, prefix: str = "") -> list[tuple[str, str, Any]]:
    """``(dotted name, docstring, default)`` of every field, nested sections flattened; an :func:`option`'s
    docstring ends with its allowed values and bounds (read from the registries, so the documentation
    cannot fall behind the code)."""
    docs = attribute_docs(cls)
    default = cls()
    hints = typing.get_type_hints(cls)
    out: list[tuple[str, str, Any]] = []
    skip = unsupported(cls)
    for f in dataclasses.fields(cls):
        name = f"{prefix}{f.name}"
        if f.name in skip:
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            out += field_docs(hints[f.name], prefix=f"{name}.")
        else:
            check = field_check(f)
            doc = docs.get(f.name, "") + (check.doc() if check is not None else "")
            out.append((name, doc, getattr(default, f.name)))
    return out
