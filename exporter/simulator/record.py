"""Frozen records for the simulator: what it needs of a frozen dataclass, without its import.

Every simulated npu-smi or hccn_tool call is a process of its own that imports the simulator;
`dataclasses` (with the `inspect`, `re` and `ast` it imports) was a third of such a call's CPU,
and making the classes a tenth. A `Record` subclass declares its fields as annotations, with
defaults as class attributes, and gets what `@dataclass(frozen=True)` gave the simulator: an
`__init__` taking the fields in order (keywords only with ``kw_only=True``), equality and a
hash over the fields, a dataclass-like repr, no assignment, and `replace`. Type checkers read
a subclass as a frozen dataclass (PEP 681).
"""

from __future__ import annotations

# typing is for type checkers only here: importing it costs every simulated call ~7 ms.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, TypeVar

    from typing_extensions import dataclass_transform

    R = TypeVar("R", bound="Record")
else:

    def dataclass_transform(**kwargs):
        return lambda cls: cls


_MISSING = object()


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a record (dataclasses' error of the same name)."""


@dataclass_transform(frozen_default=True)
class Record:
    """A frozen record: subclass it and annotate the fields (see the module docstring)."""

    _record_fields: ClassVar[tuple[str, ...]] = ()
    _record_defaults: ClassVar[dict[str, object]] = {}
    _record_kw_only: ClassVar[bool] = False

    def __init_subclass__(cls, *, kw_only: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = tuple(name for name, kind in cls.__dict__.get("__annotations__", {}).items() if not str(kind).startswith("ClassVar"))
        cls._record_fields = cls._record_fields + tuple(name for name in own if name not in cls._record_fields)
        defaults = {name: value for name, value in cls._record_defaults.items() if name not in own}
        defaults.update((name, cls.__dict__[name]) for name in own if name in cls.__dict__)
        cls._record_defaults = defaults
        cls._record_kw_only = kw_only

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        fields = cls._record_fields
        if args and (cls._record_kw_only or len(args) > len(fields)):
            allowed = 0 if cls._record_kw_only else len(fields)
            raise TypeError(f"{cls.__qualname__}() takes {allowed} positional arguments but {len(args)} were given")
        values = dict(zip(fields, args))
        for name, value in kwargs.items():
            if name in values:
                raise TypeError(f"{cls.__qualname__}() got multiple values for argument {name!r}")
            if name not in fields:
                raise TypeError(f"{cls.__qualname__}() got an unexpected keyword argument {name!r}")
            values[name] = value
        state = self.__dict__
        defaults = cls._record_defaults
        for name in fields:
            value = values.get(name, _MISSING)
            if value is _MISSING:
                value = defaults.get(name, _MISSING)
                if value is _MISSING:
                    raise TypeError(f"{cls.__qualname__}() missing required argument {name!r}")
            state[name] = value

    def _record_values(self) -> tuple[object, ...]:
        state = self.__dict__
        return tuple(state[name] for name in self._record_fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._record_values() == other._record_values()

    def __hash__(self) -> int:
        return hash(self._record_values())

    def __repr__(self) -> str:
        state = self.__dict__
        return f"{type(self).__qualname__}({', '.join(f'{name}={state[name]!r}' for name in self._record_fields)})"

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


def replace(record: R, **changes: object) -> R:
    """A copy of ``record`` with some fields changed (dataclasses.replace)."""
    state = record.__dict__
    values = {name: changes.pop(name) if name in changes else state[name] for name in record._record_fields}
    return type(record)(**values, **changes)
