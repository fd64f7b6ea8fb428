"""Inside a new network namespace: bring loopback up, listen on 127.0.0.1:PORT, send
the listener out over the inherited Unix socket FD (to guard's egress proxy, outside
the namespace), wait for its acknowledgement, then exec the command.

    python netns_shim.py FD PORT -- COMMAND [ARGS...]
"""

import fcntl
import os
import socket
import struct
import sys

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def main() -> int:
    fd, port, sep, *command = sys.argv[1:]
    assert sep == "--" and command, __doc__
    loopback_up()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(64)
    chan = socket.socket(fileno=int(fd))
    socket.send_fds(chan, [b"L"], [listener.fileno()])
    if chan.recv(1) != b"k":
        print("netns_shim: the proxy did not take the listener", file=sys.stderr)
        return 125
    chan.close()
    listener.close()
    os.execvp(command[0], command)
    return 127


if __name__ == "__main__":
    sys.exit(main())
