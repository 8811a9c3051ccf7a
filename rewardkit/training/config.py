"""One config convention for every trainer: dataclasses whose fields carry attribute docstrings, loaded from
defaults < preset < YAML file < ``--set a.b=value`` overrides, with every key and type checked on load.

The RL run config (:mod:`rewardkit.rl.config`) is a tree of sections; the reward-model configs
(:class:`~rewardkit.rewardmodels.orm.config.ORMTrainConfig`, the PRM's ``PRMTrainConfig``) and the SFT
warm start are flat. The same functions load, override, dump and document all of them.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import json
import textwrap
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

C = TypeVar("C")


class ConfigError(ValueError):
    """A bad key or value in a config file or override."""


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
    """``cls(**values)`` with unknown keys refused and every value converted to its field's type."""
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
    if "=" not in assignment:
        raise ConfigError(f"override {assignment!r} is not KEY=VALUE")
    key, _, raw = assignment.partition("=")
    parts = key.strip().split(".")
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
    node[parts[-1]] = parse_literal(raw) if raw.strip() else ""


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
        deep_update(tree, layer)
        build(cls, tree, where)
    for assignment in overrides or []:
        apply_override(tree, assignment)
    return build(cls, tree, where)


def dump(config: Any, path: str | Path | None = None) -> str:
    """A config dataclass as YAML (written to ``path`` when given)."""
    import yaml

    text = yaml.safe_dump(json.loads(json.dumps(dataclasses.asdict(config))), sort_keys=False)
    if path is not None:
        Path(path).write_text(text)
    return text


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
    """``(dotted name, docstring, default)`` of every field, nested sections flattened."""
    docs = attribute_docs(cls)
    default = cls()
    hints = typing.get_type_hints(cls)
    out: list[tuple[str, str, Any]] = []
    for f in dataclasses.fields(cls):
        name = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(hints[f.name]):
            out += field_docs(hints[f.name], prefix=f"{name}.")
        else:
            out.append((name, docs.get(f.name, ""), getattr(default, f.name)))
    return out
