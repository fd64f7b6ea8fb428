"""The few ctypes names the confinement helper uses, built on ``_ctypes`` alone.

``import ctypes`` costs the helper about as much CPU as everything else it does
after the interpreter starts (its ``__init__`` builds dozens of types and
imports ``struct``); ``_ctypes`` is the C core it wraps. :mod:`landlock` and
:mod:`seccomp` import this module *as* ``ctypes`` at run time and the real
ctypes for type checking, so the names and behaviour here must match ctypes':
simple types, ``Structure``, ``POINTER``, ``byref``, ``addressof``, ``get_errno`` and a
``CDLL(None, use_errno=True)`` whose attributes are C functions returning
``int`` (a settable ``restype``), cached per name. Nothing else of ctypes.

Beside them, imported by name (not through ``ctypes``): :func:`libc`, the process's C
library opened once for :mod:`seccomp`, :mod:`namespaces` and :mod:`attrs`, and
:func:`syscall`, the raw ``syscall(2)`` all three make their calls through.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # the real ctypes, for the modules that use this one
    from ctypes import (
        CDLL,
        POINTER,
        Structure,
        addressof,
        byref,
        c_int,
        c_int32,
        c_long,
        c_size_t,
        c_uint8,
        c_uint16,
        c_uint32,
        c_uint64,
        c_ulong,
        c_ushort,
        c_void_p,
        get_errno,
    )
else:
    from _ctypes import (
        FUNCFLAG_CDECL,
        FUNCFLAG_USE_ERRNO,
        POINTER,
        RTLD_LOCAL,
        CFuncPtr,
        Structure,
        _SimpleCData,
        addressof,
        byref,
        dlopen,
        get_errno,
    )

    def _simple(name: str, code: str) -> type:
        """``class NAME(_SimpleCData): _type_ = CODE``, as ctypes defines its simple types."""
        return type(_SimpleCData)(name, (_SimpleCData,), {"_type_": code})

    c_int = _simple("c_int", "i")
    c_long = _simple("c_long", "l")
    c_ulong = _simple("c_ulong", "L")
    c_ushort = _simple("c_ushort", "H")
    c_uint8 = _simple("c_uint8", "B")
    c_uint32 = _simple("c_uint32", "I")
    c_uint64 = _simple("c_uint64", "Q")
    c_void_p = _simple("c_void_p", "P")
    c_int32 = c_int
    c_uint16 = c_ushort
    c_size_t = c_ulong  # LP64: every architecture guard has a syscall table for

    class _Function(CFuncPtr):
        _flags_ = FUNCFLAG_CDECL | FUNCFLAG_USE_ERRNO
        _restype_ = c_int

    class CDLL:
        """The C library of this process (``CDLL(None, use_errno=True)`` only)."""

        def __init__(self, name: None, use_errno: bool = True) -> None:
            if name is not None or not use_errno:
                raise ValueError("guard's _ffi opens only the process's own C library, with errno")
            self._handle = dlopen(None, RTLD_LOCAL)

        def __getattr__(self, name: str) -> object:
            if name.startswith("_"):
                raise AttributeError(name)
            fn = _Function((name, self))
            setattr(self, name, fn)
            return fn


_libc: CDLL | None = None


def libc() -> CDLL:
    """The process's own C library (``CDLL(None, use_errno=True)``), opened once."""
    global _libc
    if _libc is None:
        _libc = CDLL(None, use_errno=True)
    return _libc


def syscall(nr: int, *args: object) -> int:
    """``syscall(nr, *args)``: the kernel's answer as is (-1 on failure, the error in
    :func:`get_errno`)."""
    fn = libc().syscall
    fn.restype = c_long
    return int(fn(c_long(nr), *args))


__all__ = [
    "CDLL", "POINTER", "Structure", "addressof", "byref", "c_int", "c_int32", "c_long", "c_size_t",
    "c_uint8", "c_uint16", "c_uint32", "c_uint64", "c_ulong", "c_ushort", "c_void_p",
    "get_errno",
]  # fmt: skip
