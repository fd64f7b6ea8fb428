"""One description of this installation and of the layers it can use here.

``guard --version``, ``guard doctor``, ``guard review`` and ``guard run`` describe
guard the same way because they all read this probe: which installation runs
(its package directory, whether it is an editable install pointing into a
checkout), the Python, the matching engine, the kernel's Landlock ABI, whether
confined commands get namespaces, and the monitor's backend. Each answer comes
# Lazy imports: the layers' modules only for what is asked: `guard --version` starts fast.

from the layer's own check (:mod:`guard.sandbox.landlock`,
:func:`guard.sandbox.confine.namespaces_unavailable`,
:func:`guard.monitor.fanotify.choose`, :func:`guard.match.engine_note`); nothing
here decides anything.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

DIST = "openoxide-guard"


@dataclass(frozen=True, slots=True)
class Installation:
    """Which guard runs: version, package directory, editable or not, the Python."""

    version: str
    package: Path
    #: the checkout an editable install (``pip install -e``) runs from, else None
    checkout: Path | None
    python: str

    @property
    def editable(self) -> bool:
        return self.checkout is not None

    def line(self) -> str:
        where = f"installed at {self.package}"
        if self.checkout is not None:
            where += f" (editable: runs the checkout {self.checkout})"
        return where


def installation() -> Installation:
    from importlib.metadata import distributions

    package = Path(__file__).resolve().parent
    python = f"Python {sys.version.split()[0]} ({sys.executable})"
    # the installed metadata (an egg-info a source tree holds has no direct_url.json)
    found = list(distributions(name=DIST))
    found.sort(key=lambda d: d.read_text("direct_url.json") is None)
    if not found:  # run from a source tree that is not installed
        return Installation("(version unknown: not installed)", package, package.parent, python)
    dist = found[0]
    checkout = None
    try:
        site = Path(str(dist.locate_file(""))).resolve()
        if site not in package.parents:  # the code is not where the package was installed
            checkout = package.parent
            url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
            if isinstance(url, str) and url.startswith("file://"):
                checkout = Path(url[len("file://"):])
    except (ValueError, OSError):
        checkout = package.parent
    return Installation(dist.version, package, checkout, python)


@dataclass(frozen=True, slots=True)
class Layers:
    """What the kernel and the machine give guard's layers here."""

    engine: str  # guard.match.engine_note()
    landlock_abi: int
    landlock: str  # "" when available, else why not
    namespaces: str  # "" when confined commands get namespaces, else why not
    monitor_backend: str  # "fanotify" | "inotify" ("" when not asked)
    monitor: str  # the backend's one line, with why ("" when not asked)

    def landlock_line(self) -> str:
        if self.landlock_abi:
            return f"Landlock ABI {self.landlock_abi}"
        return f"no Landlock: {self.landlock}"

    def namespaces_line(self) -> str:
        if self.namespaces:
            return f"no namespaces: {self.namespaces}"
        who = "mount, network, PID, IPC" if os.geteuid() == 0 else "user, mount, network, PID, IPC"
        return f"namespaces: {who}"


def layers(root: str | os.PathLike[str] | None = None, *, monitor: bool = True) -> Layers:
    """The probe of the layers, the monitor's for the tree at ``root`` (default: here);
    ``monitor=False`` leaves the monitor out (``--version``: it would load the monitor)."""
    from guard.match import engine_note
    from guard.sandbox import landlock
    from guard.sandbox.confine import namespaces_unavailable

    abi = landlock.abi_version()
    backend = line = ""
    if monitor:
        from guard.monitor.fanotify_group import choose

        choice = choose([Path(os.path.realpath(root or os.getcwd()))])
        backend, line = choice.backend, choice.line()
    return Layers(
        engine=engine_note(),
        landlock_abi=abi,
        landlock="" if abi else landlock.unavailable_reason(),
        namespaces=namespaces_unavailable(),
        monitor_backend=backend,
        monitor=line,
    )


def version_text() -> str:
    """What ``guard --version`` prints: the version, then which installation, the Python
    and the layers available here (``guard doctor`` adds the monitor's backend)."""
    inst = installation()
    lay = layers(monitor=False)
    lines = [
        f"guard {inst.version}",
        f"  {inst.line()}",
        f"  {inst.python}",
        f"  {lay.engine}",
        f"  kernel confinement: {lay.landlock_line()}; {lay.namespaces_line()}",
    ]
    return "\n".join(lines) + "\n"
