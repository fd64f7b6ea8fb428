"""Real rsyslogd processes for the tests: each with its own configuration, pid file and
work directory, on loopback ports; never the system's instance."""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from components import require_component

RSYSLOGD = "/usr/sbin/rsyslogd"


def rsyslogd() -> Path:
    return require_component("rsyslogd (Debian rsyslog)", shutil.which("rsyslogd") or RSYSLOGD,
                             "apt-get install rsyslog rsyslog-relp")


def omrelp() -> None:
    found = [p for p in Path("/usr/lib").glob("*/rsyslog/omrelp.so")]
    require_component("rsyslog's RELP modules (Debian rsyslog-relp)",
                      found[0] if found else None, "apt-get install rsyslog-relp")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, cond: Callable[[], bool], timeout: float = 120.0) -> None:
    """Wait until ``cond()`` holds (polled); fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class Rsyslogd:
    """One rsyslogd: ``-n -f CONF -i PIDFILE``, its work directory under ``home``."""

    def __init__(self, home: Path, name: str, config: str) -> None:
        self.home = home / name
        self.work = self.home / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.conf = self.home / "rsyslog.conf"
        self.conf.write_text(config.replace("@WORK@", str(self.work)))
        self.pidfile = self.home / "rsyslogd.pid"
        self.log = self.home / "rsyslogd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def check_config(self) -> None:
        proc = subprocess.run([str(rsyslogd()), "-N1", "-f", str(self.conf)],
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(rsyslogd()), "-n", "-f", str(self.conf), "-i", str(self.pidfile)],
                stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> Rsyslogd:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def edge_config(tcp_port: int, relp_port: int, unix_socket: Path | None = None) -> str:
    """The machine's rsyslog: guard's records in (TCP, and a Unix socket), out over RELP
    with a disk-assisted queue (docs/fleet.md)."""
    unix = ""
    if unix_socket is not None:
        unix = (f'module(load="imuxsock" SysSock.Use="off")\n'
                f'input(type="imuxsock" Socket="{unix_socket}" UseSpecialParser="off"'
                f' ParseHostname="on" ruleset="guard")\n')
    return f"""\
global(workDirectory="@WORK@" maxMessageSize="64k")
module(load="imtcp")
module(load="omrelp")
{unix}input(type="imtcp" address="127.0.0.1" port="{tcp_port}" ruleset="guard")
ruleset(name="guard") {{
  action(type="omrelp" target="127.0.0.1" port="{relp_port}"
         template="RSYSLOG_SyslogProtocol23Format"
         queue.type="LinkedList" queue.filename="guard-relp" queue.saveOnShutdown="on"
         queue.maxDiskSpace="1g" action.resumeRetryCount="-1" action.resumeInterval="1")
}}
"""


def central_config(relp_port: int, out: Path) -> str:
    """The organisation's collector: RELP in, one JSON line per record out."""
    return f"""\
global(workDirectory="@WORK@" maxMessageSize="64k")
module(load="imrelp")
input(type="imrelp" address="127.0.0.1" port="{relp_port}" ruleset="store")
template(name="guard-json" type="string" string="%msg%\\n")
ruleset(name="store") {{
  if $app-name == "openoxide-guard" then {{
    action(type="omfile" file="{out}" template="guard-json")
  }}
}}
"""
