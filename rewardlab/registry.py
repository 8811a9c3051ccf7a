"""Name -> implementation registries, with lazy imports so that naming a verifier costs nothing until used.

Built-in entries are "module:attribute" strings resolved on first use; third-party code registers with the
decorator::

    @register_verifier("my_checker")
    class MyChecker(Verifier): ...

A name is taken once: registering another object under a taken name raises :class:`NameTakenError` naming
both, unless ``override=True`` is given. Registering the same object (or the same "module:attr" path, as a
re-imported module does) again is a no-op. An entry may carry *traits*: a frozen object describing what the
implementation needs or guarantees, readable with :meth:`Registry.traits` without importing a lazy entry.

A registry read by a layer below the code that fills it names that code's module as its ``home``: the home
is imported on the first lookup, so its built-ins are there whoever asks first (a string, not an import).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """Raised when a registry has no entry of that name; the message lists the known names."""

    def __str__(self) -> str:  # KeyError quotes its message; a CLI wants the plain sentence
        return str(self.args[0])


class NameTakenError(ValueError):
    """Raised when a name is registered twice with different objects and no ``override=True``."""


def entry_path(entry: Any) -> str:
    """``"module:qualname"`` of a registered object (a lazy entry is its own path)."""
    if isinstance(entry, str):
        return entry
    module = getattr(entry, "__module__", None) or "?"
    name = getattr(entry, "__qualname__", None) or getattr(entry, "__name__", None) or repr(entry)
    return f"{module}:{name}"


def _same_entry(old: Any, new: Any) -> bool:
    """The identical object, or the same definition by path (a module imported again, or a lazy path and
    the object it names). Lambdas share one qualname, so only identity makes two of them the same."""
    if old is new:
        return True
    path = entry_path(new)
    return "<lambda>" not in path and entry_path(old) == path


class Registry(Generic[T]):
    """A mapping from names to objects (classes, functions), some given as lazy "module:attr" paths."""

    def __init__(self, kind: str, *, home: str | None = None) -> None:
        self.kind = kind
        self.home = home
        self._home_state = "none" if home is None else "pending"
        self._entries: dict[str, T | str] = {}
        self._traits: dict[str, Any] = {}

    def register(
        self, name: str, obj: T | str | None = None, *, traits: Any = None, override: bool = False
    ) -> Callable[[T], T] | None:
        """``register(name, obj)`` or ``@register(name)``. ``obj`` may be a "module:attr" string.

        Raises:
            NameTakenError: ``name`` is taken by another object and ``override`` is False.
        """
        if obj is not None:
            self._add(name, obj, traits, override)
            return None

        def decorator(target: T) -> T:
            self._add(name, target, traits, override)
            return target

        return decorator

    def _add(self, name: str, obj: T | str, traits: Any, override: bool) -> None:
        self._load_home()  # a built-in registered later would otherwise collide with this entry
        if name in self._entries and not override:
            old = self._entries[name]
            if not _same_entry(old, obj):
                raise NameTakenError(
                    f"{self.kind} {name!r} is taken by {entry_path(old)}; pass override=True to replace it "
                    f"with {entry_path(obj)}"
                )
            if self._traits.get(name) != traits:
                raise NameTakenError(
                    f"{self.kind} {name!r} is registered with traits {self._traits.get(name)!r}; pass "
                    f"override=True to give {entry_path(obj)} the traits {traits!r}"
                )
        self._entries[name] = obj
        self._traits[name] = traits

    def unregister(self, name: str) -> None:
        """Removes ``name`` (tests that register their own entries undo them with this)."""
        self._check(name)
        del self._entries[name]
        self._traits.pop(name, None)

    def get(self, name: str) -> T:
        self._check(name)
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = lazy(entry)
            self._entries[name] = entry
        return entry  # type: ignore[return-value]

    def traits(self, name: str) -> Any:
        """The traits ``name`` was registered with (``None`` if none); a lazy entry stays unimported."""
        self._check(name)
        return self._traits[name]

    def names(self) -> list[str]:
        self._load_home()
        return sorted(self._entries)

    def _check(self, name: str) -> None:
        self._load_home()
        if name not in self._entries:
            known = ", ".join(sorted(self._entries)) or "none"
            raise UnknownNameError(f"unknown {self.kind} {name!r} (known: {known})")

    def _load_home(self) -> None:
        # Marked loading first: the home's own registrations come back here while it imports.
        if self._home_state == "pending" and self.home is not None:
            self._home_state = "loading"
            try:
                importlib.import_module(self.home)
            except BaseException:
                self._home_state = "pending"
                raise
            self._home_state = "loaded"

    def __contains__(self, name: object) -> bool:
        self._load_home()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        """The names in registration order (as a dict of names would give them)."""
        self._load_home()
        return iter(list(self._entries))

    def __len__(self) -> int:
        self._load_home()
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"


def lazy(path: str) -> Any:
    """Resolves a "module:attr" path."""
    module_name, _, attr = path.partition(":")
    return getattr(importlib.import_module(module_name), attr)
