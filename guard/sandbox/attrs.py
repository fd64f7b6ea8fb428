"""A confined command's ``chmod`` and ``utime`` calls, performed by guard on what it checked.

Landlock has no right for a file's mode or times, and the command owns the plan
directory, which must stay writable (plan files are created in it): no mount flag
and no Landlock rule can stop ``chmod 0777 .openoxide/plans`` or ``touch -d 2001-01-01
.openoxide/plans``. In the Landlock-only fallback, likewise nothing stops a plain
``chmod`` of another terminal's node (the user owns it).

So the seccomp filter (:mod:`guard.sandbox.seccomp`, ``supervised``) hands every call
of the chmod and utime families (``chmod``, ``fchmod``, ``fchmodat``, ``fchmodat2``,
``utime``, ``utimes``, ``utimensat``, ``futimesat``) to a supervisor through a seccomp
user notification: :meth:`guard.sandbox.attrs_serve.Supervisor.serve`, a thread of the
helper's outer process (:func:`start`). It never
lets the call go on in the command (its pointer arguments could change meanwhile);
it reads the path (and the times) from the command's memory once, resolves them as
the command would (from the command's cwd or directory descriptor, under the
command's root, no ``/proc`` magic link but ``/proc/self/fd/N``), holds the file by an
``O_PATH`` descriptor, refuses with ``EPERM`` when it is the plan directory itself (or,
in the fallback, a terminal other than the command's own), and otherwise makes the
change itself on that descriptor with the command's rights (the thread holds no
capability; mount flags, ownership and permissions decide as for the command) and
answers with its result. If the supervisor is gone, every such call fails (``ENOSYS``).
Each call costs a round trip to the thread (tens of microseconds).

This module is what every confined command pays for: the filter's installation with
its listener (:func:`install`) and the thread (:func:`start`), which receives the
listener and waits on it. What decides and performs the calls,
:mod:`guard.sandbox.attrs_serve`, is loaded by the thread when the first call waits
(the call waits meanwhile; nothing is missed, the kernel queues it): a command that
never calls chmod or utime never loads it. Stdlib only, nothing slow to import.
"""

# Lazy imports: guard.sandbox.attrs_serve when the first chmod or utime call waits (the
# helper starts this module's thread before every confined command).
from __future__ import annotations

import _thread
import errno
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ctypes

    from guard.sandbox import namespaces, seccomp, terminals
    from guard.sandbox._ffi import libc as _lib
    from guard.sandbox._ffi import syscall
elif __package__:  # _ctypes alone: ``import ctypes`` costs the helper ~5 ms of CPU
    from guard.sandbox import _ffi as ctypes
    from guard.sandbox import namespaces, seccomp, terminals
    from guard.sandbox._ffi import libc as _lib
    from guard.sandbox._ffi import syscall
else:  # run by the helper as a sibling module, without the package
    import _ffi as ctypes
    import namespaces
    import seccomp
    import terminals
    from _ffi import libc as _lib
    from _ffi import syscall

_SECCOMP = {"x86_64": 317, "aarch64": 277}
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
POLLIN, POLLERR, POLLHUP = 0x1, 0x8, 0x10


def install(filt: seccomp.Filter) -> int | None:
    """Install the ``supervised`` filter ``filt`` for this process and every process it
    starts, with a new listener: its descriptor, for :func:`start`'s thread. None, and the
    same filter unsupervised installed instead, when a filter of this process has a
    listener already (guard inside a command another guard supervises: that one still
    sees every chmod and utime, its filter stays in force). OSError when refused."""
    seccomp.set_no_new_privs()
    listener = syscall(
        _SECCOMP[seccomp.machine()], ctypes.c_ulong(SECCOMP_SET_MODE_FILTER),
        ctypes.c_ulong(SECCOMP_FILTER_FLAG_NEW_LISTENER), ctypes.byref(filt.fprog),
    )  # fmt: skip
    if listener >= 0:
        return listener
    err = ctypes.get_errno()
    if err != errno.EBUSY:
        raise OSError(err, f"cannot install the seccomp filter: {os.strerror(err)}")
    seccomp.Filter(walls=filt.walls, unix_sockets=filt.unix_sockets).install()
    return None


def hand_over(channel: int, listener: int | None) -> None:
    """Send ``listener`` (None: none was made) over ``channel`` to :func:`start`'s thread
    and close both here. The restricted process does so once the command has started (the
    thread, woken to receive it, would compete with the command's start for a core) and
    makes no chmod or utime call before (it would wait for a supervisor without a
    listener); a call the command makes meanwhile waits. If it cannot be sent, the
    listener closes here and every such call fails (``ENOSYS``): refused, said on stderr."""
    try:
        if listener is not None:
            namespaces.send_fd(channel, listener)
    except OSError as exc:
        os.write(2, f"guard confine: chmod and utime refused: {exc}\n".encode())
    finally:
        for fd in (listener, channel):
            if fd is not None:
                os.close(fd)


def start(channel: int, plan_fds: list[int], *, chroot: bool, walls: bool) -> None:
    """Start the thread that answers the command's chmod and utime calls: it receives the
    listener the restricted process sends over ``channel`` (none comes when that process
    failed first: then nothing is served, and those calls fail). ``plan_fds``: the plan
    directories, held open; ``chroot``: the command has a mount namespace of its own;
    ``walls`` (the fallback): the terminals in sight are the host's, only the command's
    own may change mode."""
    plans = []
    for fd in plan_fds:
        st = os.fstat(fd)
        plans.append((st.st_dev, st.st_ino))
    own_rdev = None
    if walls:
        own = terminals.own_terminal()
        try:
            own_rdev = os.stat(own).st_rdev if own is not None else None
        except OSError:
            own_rdev = None
    machine = seccomp.machine()

    def serve() -> None:
        try:
            listener = namespaces.receive_fd(channel)
        finally:
            os.close(channel)
        if listener is None:
            return
        if not _first_call(listener):
            os.close(listener)  # no process uses the filter any more: nothing was called
            return
        try:
            if TYPE_CHECKING or __package__:
                from guard.sandbox import attrs_serve
            else:  # the helper: the sibling by its plain name
                import attrs_serve
            supervisor = attrs_serve.Supervisor(
                plans, terminals=walls, own_rdev=own_rdev, chroot=chroot, machine=machine
            )
        except BaseException as exc:  # the service ends: every such call fails (ENOSYS)
            os.close(listener)
            os.write(2, f"guard confine: chmod and utime refused: {exc}\n".encode())
            return
        supervisor.serve(listener)

    _thread.start_new_thread(serve, ())


def _first_call(listener: int) -> bool:
    """Wait until a call waits on ``listener`` (True) or no process uses its filter any
    more (False): what decides the calls is loaded only once there is one."""
    pollfd = (ctypes.c_int * 2)(listener, POLLIN)  # struct pollfd: fd, events, revents
    poll = _lib().poll
    while True:
        pollfd[1] = POLLIN
        if int(poll(ctypes.byref(pollfd), ctypes.c_ulong(1), ctypes.c_int(-1))) < 0:
            if ctypes.get_errno() == errno.EINTR:
                continue
            return True  # the service's own loop says what is wrong, call by call
        revents = pollfd[1] >> 16
        if revents & POLLIN:
            return True
        if revents & (POLLHUP | POLLERR):
            return False
