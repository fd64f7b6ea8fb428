"""The confinement helper's command line: its flags, parsed into :class:`Args`.

Holds the flags the helper (:mod:`guard.sandbox.helper`) takes, their parser
(:func:`parse`: a bad command line is a ValueError saying what is wrong) and the
constants they name: the terminal and sink devices ``--devices`` makes writable, and
:data:`NOT_STARTED`, the exit status when the command was not started. It does not
hold what the helper does with them (:mod:`guard.sandbox.helper`) nor the argv a
caller builds (:func:`guard.sandbox.confine.helper_argv`).

Stdlib only, nothing slow to import: it runs before every confined command.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from guard.sandbox import seccomp

#: Terminal devices: writable, with device ioctls allowed (what a terminal program needs).
TERMINAL_DEVICES = ("/dev/tty", "/dev/pts", "/dev/ptmx")
#: Writable sinks every shell script assumes.
SINK_DEVICES = ("/dev/null",)
#: The helper's exit status when the command was not started (fail closed).
NOT_STARTED = 126

USAGE = (
    "usage: confine.py [--plans DIR]... [--write PATH]... [--ioctl PATH]... [--devices]"
    " [--tmpdir DIR | --private-tmp] [--namespaces] [--walls] [--socket PATH]..."
    " [--listen PORT --egress-fd FD | --egress SPEC] [--abi N (0: no Landlock)] [--hide PATH]..."
    " [--no-scope-signals]"
    " [--status-fd FD] [--go-fd FD] [--announce PREFIX] -- COMMAND [ARGS...]\n"
    "       confine.py --probe"
)


class Args:
    __slots__ = (
        "abi", "announce", "attrs_fd", "command", "command_missing", "egress", "egress_fd",
        "enforced", "filter",
        "go_fd", "hide", "ioctl", "listen", "listener", "namespaces", "plans", "private_tmp",
        "scope",
        "sockets", "status_fd", "tmpdir", "walls", "writable",
    )  # fmt: skip

    def __init__(self) -> None:
        self.writable: list[str] = []
        self.plans: list[str] = []
        self.ioctl: list[str] = []
        self.sockets: list[str] = []
        self.hide: list[str] = []  # covered in the namespaces' view (guard's audit key)
        self.abi: int | None = None
        self.scope = True
        self.status_fd: int | None = None
        self.go_fd: int | None = None
        self.egress_fd: int | None = None
        #: where the restricted process sends the seccomp listener (:mod:`guard.sandbox.attrs`)
        self.attrs_fd: int | None = None
        #: the seccomp listener, held by the restricted process until it is sent there
        self.listener: int | None = None
        self.egress: str | None = None
        self.listen: int | None = None
        self.announce: str | None = None
        self.tmpdir: str | None = None
        self.private_tmp = False
        self.namespaces = False
        self.walls = False
        self.command: list[str] = []
        self.command_missing = False
        #: the seccomp filter, assembled before pid 1 is forked (so that it only installs it)
        self.filter: seccomp.Filter | None = None
        #: what the restriction enforces (its report), announced once the command may start
        self.enforced: dict[str, object] | None = None


#: options whose value is added to a list, kept as a string, or read as a number
_LISTS = {
    "--write": "writable", "--plans": "plans", "--ioctl": "ioctl", "--socket": "sockets",
    "--hide": "hide",
}  # fmt: skip
_STRINGS = {"--tmpdir": "tmpdir", "--announce": "announce", "--egress": "egress"}
_NUMBERS = {
    "--abi": "abi", "--status-fd": "status_fd", "--go-fd": "go_fd", "--egress-fd": "egress_fd",
    "--listen": "listen",
}  # fmt: skip
_VALUED = {**_LISTS, **_STRINGS, **_NUMBERS}
_FLAGS = {
    "--no-scope-signals": "scope", "--private-tmp": "private_tmp", "--namespaces": "namespaces",
    "--walls": "walls",
}  # fmt: skip


def parse(argv: Sequence[str]) -> Args:
    args = Args()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            args.command = list(argv[i + 1 :])
            if not args.command:
                raise ValueError("no command given after '--'")
            if args.egress is not None and (args.listen is not None or args.egress_fd is not None):
                raise ValueError("--egress serves the listener here: not with --listen/--egress-fd")
            if args.listen is not None and args.egress_fd is None:
                raise ValueError("--listen needs --egress-fd (where the listener goes)")
            if (args.listen is not None or args.egress is not None) and not args.namespaces:
                raise ValueError("an egress listener needs --namespaces (a network to listen in)")
            return args
        if arg in _FLAGS:
            setattr(args, _FLAGS[arg], arg != "--no-scope-signals")
        elif arg == "--devices":
            args.writable += SINK_DEVICES
            for dev in TERMINAL_DEVICES:
                # a symlinked device (bwrap's /dev/ptmx -> pts/ptmx inside a host's sandbox)
                # gets no rule of its own: what it points to has one, or none
                if os.path.exists(dev) and not os.path.islink(dev):
                    args.writable.append(dev)
                    args.ioctl.append(dev)
        elif arg in _VALUED and i + 1 < len(argv):
            value = argv[i + 1]
            i += 1
            if arg in _LISTS:
                getattr(args, _LISTS[arg]).append(value)
            elif arg in _STRINGS:
                setattr(args, _STRINGS[arg], value)
            else:
                setattr(args, _NUMBERS[arg], int(value))
        else:
            raise ValueError(f"unexpected argument {arg!r}")
        i += 1
    raise ValueError("missing '--' before the command")


def await_go(fd: int) -> bool:
    """Wait for the caller's go (one byte ``g`` on ``fd``), started early so that this
    interpreter's start-up and the confinement overlap the caller's (``guard run`` starts
    its monitor meanwhile). Nothing is created on the host and nothing is run before it;
    EOF or anything else is a no: the command is not started."""
    byte = b""
    while True:
        try:
            byte = os.read(fd, 1)
        except InterruptedError:
            continue
        except OSError:
            pass
        break
    try:  # noqa: SIM105 (contextlib would cost start-up time)
        os.close(fd)
    except OSError:
        pass
    return byte == b"g"
