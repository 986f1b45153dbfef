"""Frozen value records: `@record` gives a class what `@dataclass(frozen=True)` gave the planner's value
classes (construction by position or keyword with defaults, immutability, ==, hash, repr, pickling), and
`replace` copies one with some fields changed.

Why not dataclasses: `@dataclass` writes each class's __init__, __repr__, __eq__, __hash__, __setattr__
and __delattr__ as source text and compiles it while the module is imported, ~4 M instructions a class, and
the mission command imports 19 such classes (~5 % of its start-up, benchmarks/bench_startup.py). A record
class shares one set of methods that read its field names instead; building a record costs a few
microseconds more, which the few hundred records a plan builds do not feel.

Fields are the class's annotations in order (a base record's first), defaults its class attributes;
`field(default_factory=...)` gives each record its own fresh default (a dict, say).
"""

import inspect
from collections.abc import Callable
from dataclasses import FrozenInstanceError
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")
R = TypeVar("R")


class _Factory:
    """A field default made afresh for every record (`field(default_factory=...)`)."""

    def __init__(self, make: Callable[[], object]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], T]) -> T:
    """A field whose default is `default_factory()`, called once per record built without it."""
    return _Factory(default_factory)  # type: ignore[return-value]  # a marker, read by @record


def _init(self: object, *args: object, **kwargs: object) -> None:
    cls = type(self)
    names: tuple[str, ...] = cls.__record_fields__  # type: ignore[attr-defined]
    if len(args) > len(names):
        raise TypeError(f"{cls.__name__}() takes {len(names)} fields but {len(args)} were given")
    values = dict(zip(names, args, strict=False))
    for name, value in kwargs.items():
        if name not in names:
            raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {name!r}")
        if name in values:
            raise TypeError(f"{cls.__name__}() got multiple values for argument {name!r}")
        values[name] = value
    defaults: dict[str, object] = cls.__record_defaults__  # type: ignore[attr-defined]
    for name in names:
        if name in values:
            continue
        if name not in defaults:
            raise TypeError(f"{cls.__name__}() missing required argument: {name!r}")
        default = defaults[name]
        values[name] = default.make() if isinstance(default, _Factory) else default
    self.__dict__.update((name, values[name]) for name in names)


def _values(self: object) -> tuple[object, ...]:
    return tuple(self.__dict__[name] for name in type(self).__record_fields__)  # type: ignore[attr-defined]


def _repr(self: object) -> str:
    shown = ", ".join(f"{name}={value!r}" for name, value in self.__dict__.items())
    return f"{type(self).__qualname__}({shown})"


def _eq(self: object, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented  # type: ignore[no-any-return]  # mypy allows it only in a class's __eq__
    return bool(_values(self) == _values(other))


def _hash(self: object) -> int:
    return hash(_values(self))


def _reduce(self: object) -> tuple[type, tuple[object, ...]]:
    return type(self), _values(self)  # pickled (and hashed by Streamlit's cache) as class + field values


def _frozen_setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[R]) -> type[R]:
    """Make `cls` a frozen record of its annotated fields (see the module's docstring)."""
    inherited = next((klass for klass in cls.__mro__[1:] if hasattr(klass, "__record_fields__")), None)
    names = list(getattr(inherited, "__record_fields__", ()))
    defaults = dict(getattr(inherited, "__record_defaults__", {}))
    for name in inspect.get_annotations(cls):
        if name not in names:
            names.append(name)
        if name in cls.__dict__:
            defaults[name] = cls.__dict__[name]
            if isinstance(defaults[name], _Factory):
                delattr(cls, name)  # no shared default left on the class
    methods: dict[str, Any] = {
        "__record_fields__": tuple(names),
        "__record_defaults__": defaults,
        "__init__": _init,
        "__repr__": _repr,
        "__eq__": _eq,
        "__hash__": _hash,
        "__reduce__": _reduce,
        "__setattr__": _frozen_setattr,
        "__delattr__": _frozen_delattr,
    }
    for name, method in methods.items():
        setattr(cls, name, method)
    return cls


def replace(rec: R, /, **changes: object) -> R:
    """A copy of the record `rec` with the given fields changed (built, and so checked, anew)."""
    cls = type(rec)
    unknown = set(changes) - set(cls.__record_fields__)  # type: ignore[attr-defined]
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {sorted(unknown)[0]!r}")
    return cls(**{**{name: rec.__dict__[name] for name in field_names(cls)}, **changes})


def field_names(cls: type) -> tuple[str, ...]:
    """The fields of a record class, in order."""
    return cls.__record_fields__  # type: ignore[attr-defined,no-any-return]
