"""Name -> implementation registries, with lazy imports so that naming a verifier costs nothing until used.

Built-in entries are "module:attribute" strings resolved on first use; third-party code registers with the
decorator::

    @register_verifier("my_checker")
    class MyChecker(Verifier): ...
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """Raised when a registry has no entry of that name; the message lists the known names."""

    def __str__(self) -> str:  # KeyError quotes its message; a CLI wants the plain sentence
        return str(self.args[0])


class Registry(Generic[T]):
    """A mapping from names to objects (classes, functions), some given as lazy "module:attr" paths."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T | str] = {}

    def register(self, name: str, obj: T | str | None = None) -> Callable[[T], T] | None:
        """``register(name, obj)`` or ``@register(name)``. ``obj`` may be a "module:attr" string."""
        if obj is not None:
            self._entries[name] = obj
            return None

        def decorator(target: T) -> T:
            self._entries[name] = target
            return target

        return decorator

    def get(self, name: str) -> T:
        if name not in self._entries:
            known = ", ".join(sorted(self._entries)) or "none"
            raise UnknownNameError(f"unknown {self.kind} {name!r} (known: {known})")
        entry = self._entries[name]
        if isinstance(entry, str):
            module_name, _, attr = entry.partition(":")
            entry = getattr(importlib.import_module(module_name), attr)
            self._entries[name] = entry
        return entry  # type: ignore[return-value]

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"


def lazy(path: str) -> Any:
    """Resolves a "module:attr" path."""
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)
