"""Kernel confinement for ``guard run``.

:mod:`guard.sandbox.landlock` is the kernel layer (Landlock and a seccomp
filter through ctypes; no policy logic; also runnable as the exec helper).
:mod:`guard.sandbox.runner` derives the writable roots from a policy and runs
a command confined, with the monitor alongside. See docs/sandbox.md.
"""
