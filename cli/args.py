"""Command-line flags from config dataclasses: every field ``foo_bar`` is ``--foo-bar`` with the field's
attribute docstring as help, former names still accepted; a ``--config`` file gives the same fields and the
flags given override it (``rewardlab rm train``, ``rm label-steps``, ``rm judge``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import types
import typing
from typing import Any

from rewardlab.config import ConfigError, attribute_docs, deprecations, load, read_config_file, unsupported
from rewardlab.errors import UserError


def none_or(conv: Any) -> Any:
    """``conv`` that also reads ``none``/``null`` as None (for optional fields)."""

    def parse(text: str):
        if text.lower() in ("none", "null"):
            return None
        return conv(text)

    parse.__name__ = getattr(conv, "__name__", "value")
    return parse


def check_pool_limits(timeout: float, spare_workers: int | None, wall_timeout: float | None = None) -> None:
    """The scoring pool's flags that ``score`` and ``serve`` share, checked (UserError in one line);
    ``None`` is the Scorer's default."""
    if not math.isfinite(timeout) or timeout <= 0:
        raise UserError(f"--timeout must be a finite number of seconds > 0, got {timeout}")
    if wall_timeout is not None and not (math.isfinite(wall_timeout) and wall_timeout > 0):
        raise UserError(f"--wall-timeout must be a finite number of seconds > 0, got {wall_timeout}")
    if spare_workers is not None and spare_workers < 0:
        raise UserError("--spare-workers must be >= 0")


def parse_bool(text: str) -> bool:
    """``true/false``, ``yes/no``, ``on/off``, ``1/0``."""
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _auto(text: str) -> Any:
    """For union-typed fields (``str | bool | None``): JSON/YAML-like literals, else the string."""
    low = text.lower()
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _argument_spec(hint: Any) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    optional = type(None) in typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        hint, origin = args[0], typing.get_origin(args[0])
    elif origin in (typing.Union, types.UnionType):
        return {"type": _auto}
    if hint is bool:
        # ``--use-lora`` alone means true; ``--use-lora false`` also works
        return {
            "type": none_or(parse_bool) if optional else parse_bool,
            "metavar": "BOOL",
            "nargs": "?",
            "const": True,
        }
    if hint in (int, float, str):
        return {"type": none_or(hint) if optional else hint, "metavar": hint.__name__.upper()}
    if origin in (list, tuple):
        return {"type": str, "nargs": "*", "metavar": "VALUE"}
    return {"type": _auto}


def add_dataclass_arguments(
    parser: argparse.ArgumentParser | Any,
    classes: dict[str, type],
    *,
    exclude: tuple[str, ...] = (),
    seen: dict[str, list[str]] | None = None,
) -> dict[str, list[str]]:
    """Adds ``--field-name`` flags for every field of the dataclasses (defaults suppressed, so only the
    flags given end up in the namespace). Returns field -> names of the classes that have it."""
    owners: dict[str, list[str]] = {} if seen is None else seen
    for label, cls in classes.items():
        hints = typing.get_type_hints(cls)
        docs = attribute_docs(cls)
        skip = unsupported(cls)
        for f in dataclasses.fields(cls):
            if f.name in exclude or not f.init or f.name in skip:
                continue
            if f.name in owners:
                owners[f.name].append(label)
                continue
            owners[f.name] = [label]
            flags = [f"--{f.name.replace('_', '-')}"]
            if "_" in f.name:
                flags.append(f"--{f.name}")
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = None
            help_text = docs.get(f.name, "")
            # argparse %-formats help strings
            help_text = f"{help_text} [{label}; default {default!r}]".strip().replace("%", "%%")
            parser.add_argument(
                *flags,
                dest=f.name,
                default=argparse.SUPPRESS,
                help=help_text,
                **_argument_spec(hints[f.name]),
            )
        for old, spec in deprecations(cls).items():  # former names: still read, with a warning
            if old in owners:
                owners[old].append(label)
                continue
            owners[old] = [label]
            flag = f"--{old.replace('_', '-')}"
            parser.add_argument(
                *dict.fromkeys([flag, f"--{old}"]),
                dest=old,
                default=argparse.SUPPRESS,
                help=f"deprecated: use --{spec.new.replace('_', '-')} [{label}]",
                type=_auto,
                nargs="?",
                const=True,
            )
    return owners


def load_config_file(path: str | None) -> dict[str, Any]:
    """A YAML/JSON ``--config`` file's values (none without a path); a bad file is a one-line error."""
    if not path:
        return {}
    try:
        return read_config_file(path)
    except ConfigError as exc:
        raise UserError(str(exc)) from None


def build_config(cls: type, values: dict[str, Any], label: str, overrides: list[str] = ()):
    """The config from file values and flags (already merged), then ``--set`` overrides; one-line errors."""
    names = {f.name for f in dataclasses.fields(cls)} | set(deprecations(cls))
    unknown = sorted(set(values) - names)
    if unknown:
        flags = ", ".join(f"--{n.replace('_', '-')}" for n in unknown)
        raise UserError(f"not an option of {label}: {flags}")
    try:
        return load(cls, values, overrides=list(overrides), where=label)
    except ConfigError as exc:
        raise UserError(str(exc).splitlines()[0]) from exc


def given_values(args: argparse.Namespace, owners: dict[str, list[str]]) -> dict[str, Any]:
    """The values of the flags the user gave (flags added by :func:`add_dataclass_arguments`)."""
    return {name: getattr(args, name) for name in owners if hasattr(args, name)}
