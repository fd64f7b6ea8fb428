"""Serve guard's egress proxy from a process of its own, started as the confinement
helper is: ``python -E -s -S egress_driver.py --sandbox DIR --spec JSON [--channel FD]``.

The proxy module is imported by its plain name from ``DIR`` (guard/sandbox), with no
site-packages, as the helper imports it. With ``--channel``, the listener arrives as a
descriptor on that Unix socket (sent from inside a network namespace) and is
acknowledged with one byte; otherwise the driver listens on 127.0.0.1 itself. It
prints ``ready PORT``, answers ``modules`` on stdin with ``guard=True|False loaded=...``
(has the guard package been imported? which of the lazily loaded modules are?), and
stops when stdin closes.
"""

import socket
import sys


def main() -> int:
    args = sys.argv[1:]
    opts = dict(zip(args[::2], args[1::2], strict=True))
    sys.path.insert(0, opts["--sandbox"])
    import egress_proxy as egress

    spec = egress.EgressSpec.from_argv_value(opts["--spec"])
    proxy = egress.EgressProxy(spec)
    if "--channel" in opts:
        print("ready 0", flush=True)  # the listener comes from the namespace
        chan = socket.socket(fileno=int(opts["--channel"]))
        _, fds, _, _ = socket.recv_fds(chan, 1, 1)
        proxy.serve(socket.socket(fileno=fds[0]))
        chan.sendall(b"k")
        chan.close()
    else:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        proxy.serve(listener)
        print(f"ready {listener.getsockname()[1]}", flush=True)
    for line in sys.stdin:
        if line.strip() == "modules":
            loaded = [m for m in ("guard", "relay", "httpwire", "json", "ipaddress")
                      if m in sys.modules]
            print(f"guard={'guard' in sys.modules} loaded={','.join(loaded)}", flush=True)
    proxy.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
