"""Run a command in a user namespace of its own where no further user namespace may be
made (``user.max_user_namespaces = 0`` there; the host's setting is untouched), as
root of that namespace (the command drops privileges itself, e.g. with setpriv).

    python userns_limit.py COMMAND [ARGS...]      (as real root)

The way a machine without unprivileged user namespaces looks to guard, made for real:
the limit is the kernel's own, in a namespace only this command lives in.
"""

import ctypes
import os
import sys

CLONE_NEWUSER = 0x10000000


def main() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        os.close(go_w)
        if libc.unshare(CLONE_NEWUSER) != 0:
            os._exit(90)
        os.write(ready_w, b"u")
        if os.read(go_r, 1) != b"g":
            os._exit(91)
        with open("/proc/sys/user/max_user_namespaces", "w") as f:
            f.write("0")
        os.execvp(sys.argv[1], sys.argv[1:])
    os.close(ready_w)
    os.close(go_r)
    if os.read(ready_r, 1) == b"u":
        for name in ("uid_map", "gid_map"):  # the same ids inside as outside
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write("0 0 65536\n")
        os.write(go_w, b"g")
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
