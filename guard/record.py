"""Records without :mod:`dataclasses`, for the classes ``guard run`` builds before its command.

A ``@dataclass`` is made at import by generating and compiling its methods' source, and
the module imports :mod:`inspect` (with ``ast``, ``dis``, ``tokenize``): about 0.3 ms for
each frozen, slotted record and several milliseconds for the first, paid by every
confined command. A :class:`Record` behaves as such a dataclass does: its fields are
named in ``__match_args__`` (declared in ``__slots__``), set by a plain ``__init__``;
equal when the class and every field are equal, hashed on the fields, shown as
``Name(field=value, ...)`` (but the fields in ``_unshown``), copied with changes by
:meth:`Record.replace`, and frozen (assigning raises
:class:`dataclasses.FrozenInstanceError`) unless made with ``frozen=False`` (then
mutable, and unhashable as a dataclass with ``eq`` is).
"""

# Lazy imports: dataclasses, for the error assigning to a frozen record raises (start-up).

from __future__ import annotations

from operator import attrgetter

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import Any, ClassVar, NoReturn, Self

#: sets a field of a frozen record (in its ``__init__``)
set_field = object.__setattr__


def _frozen(what: str) -> NoReturn:
    from dataclasses import FrozenInstanceError

    raise FrozenInstanceError(what)


class Record:
    """Base of a record class (see the module's docstring)."""

    __slots__ = ()
    __match_args__: ClassVar[tuple[str, ...]] = ()
    #: fields left out of the repr (a dataclass's ``field(repr=False)``)
    _unshown: ClassVar[frozenset[str]] = frozenset()
    _values: ClassVar[Any] = None

    def __init_subclass__(cls, *, frozen: bool = True, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = cls.__match_args__
        get = attrgetter(*names) if len(names) > 1 else (lambda obj: (getattr(obj, names[0]),))
        cls._values = staticmethod(get)
        if not frozen:
            cls.__setattr__ = object.__setattr__  # type: ignore[method-assign,assignment]
            cls.__delattr__ = object.__delattr__  # type: ignore[method-assign]
            cls.__hash__ = None  # type: ignore[method-assign,assignment]

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` made (what :func:`dataclasses.replace` gives a dataclass)."""
        values = {n: getattr(self, n) for n in self.__match_args__}
        unknown = set(changes) - set(values)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        values.update(changes)
        return type(self)(**values)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        values: Any = self._values
        return bool(values(self) == values(other))

    def __hash__(self) -> int:
        return hash(self._values(self))

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{n}={getattr(self, n)!r}" for n in self.__match_args__ if n not in self._unshown
        )
        return f"{type(self).__qualname__}({shown})"

    def __setattr__(self, name: str, value: object) -> None:
        _frozen(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        _frozen(f"cannot delete field {name!r}")
