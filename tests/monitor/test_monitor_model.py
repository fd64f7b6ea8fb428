"""Model-based test of `--restore`: whatever the plan agent does, the worktree comes back.

Hypothesis generates sequences of agent operations (create, modify, append,
truncate, delete, rename across directories, chmod, symlink swap, directory
rename, writing a file over the copy cap, writing the plan, rewriting the git object
that holds the baseline of src/app.py, chmod-ing the quarantine shut, creating a
terabyte-sized sparse file, deleting git's object database, swapping the worktree for a
modified copy, rewriting guard's baseline copies on disk, moving the worktree aside and
deleting it). They run for real against a real git worktree while the monitor (restore
on, with the fanotify and with the inotify backend) watches; as root, the whole model
runs again as uid 65534 (inotify: fanotify needs CAP_SYS_ADMIN). Once the
monitor has settled (:meth:`Monitor.settle`: every event handled, no file
waiting, a clean reconciliation scan — a condition, never a sleep):

* the worktree equals the baseline byte for byte (content, mode, symlink
  targets, directory modes), except the plan file (allowed: the last version
  written) and the file over the copy cap (announced at start as not
  restorable; a change to it is reported and left in place) and src/app.py when its
  restore said "original unavailable" (its object was rewritten after the agent had
  changed the file): then it must not hold the object's poisoned bytes; after the
  worktree was deleted, the file over the copy cap (never copied) is gone;
* git reads the same history (HEAD, and `git fsck`), unless the object was rewritten;
* every violating version the agent left behind (observed right after the
  operation that produced it, and not changed by a later operation of the agent
  itself, nor deleted with the whole worktree and its quarantine) is in quarantine,
  byte for byte.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from guard.decide import Guard
from guard.monitor import Monitor

FILES = ["src/app.py", "src/util.py", "src/sub/deep.txt", "docs/a.md", "notes.txt", "new.txt",
         "src/new.bin", "docs/sub/x.txt"]
DIRS = ["src", "docs", "src/sub", "docs/sub"]
CAP = 4096
BIG = "data/big.bin"
PLAN = ".openoxide/plans/plan.md"
POISON = b"import poisoned\n"
HUGE = "src/huge.bin"

Snapshot = dict[str, tuple[str, bytes | str, int]]  # a file over 1 MiB: "huge:SIZE"


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def make_worktree(base: Path) -> Path:
    wt = base / "wt"
    for rel, data in (("src/app.py", b"print('app')\n"), ("src/util.py", b"def f(): pass\n"),
                      ("src/sub/deep.txt", b"deep\n"), ("docs/a.md", b"# a\n")):
        (wt / rel).parent.mkdir(parents=True, exist_ok=True)
        (wt / rel).write_bytes(data)
    (wt / "src" / "util.py").chmod(0o755)
    git(wt.parent, "init", "-q", str(wt))
    git(wt, "add", "-A")
    git(wt, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    (wt / "notes.txt").write_bytes(b"untracked \x00 notes\n")
    (wt / "docs" / "sub").mkdir()
    (wt / "docs" / "sub" / "x.txt").write_bytes(b"x" * 100)
    (wt / "docs" / "link").symlink_to("a.md")
    (wt / "data").mkdir()
    (wt / BIG).write_bytes(b"B" * (CAP * 2))
    (wt / ".openoxide" / "plans").mkdir(parents=True)
    return Path(os.path.realpath(wt))


def snapshot(wt: Path) -> Snapshot:
    """Every path except .git, the quarantine and the plans: kind, content/target, mode."""
    out: Snapshot = {}
    for dirpath, dirnames, filenames in os.walk(wt):
        rel_dir = os.path.relpath(dirpath, wt)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in (".git", ".openoxide")]
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, wt)
            s = os.lstat(p)
            mode = stat.S_IMODE(s.st_mode)
            if stat.S_ISLNK(s.st_mode):
                out[rel] = ("link", os.readlink(p), 0)
            elif stat.S_ISDIR(s.st_mode):
                out[rel] = ("dir", b"", mode)
            elif stat.S_ISREG(s.st_mode) and s.st_size > 1 << 20:
                out[rel] = ("file", f"huge:{s.st_size}", mode)  # never read a terabyte
            elif stat.S_ISREG(s.st_mode):
                out[rel] = ("file", Path(p).read_bytes(), mode)
            else:
                out[rel] = ("other", b"", mode)
    return out


def quarantined(wt: Path, session: str) -> list[bytes | str]:
    """Every regular file's bytes and every symlink's target kept in the session's quarantine."""
    out: list[bytes | str] = []
    root = wt / ".openoxide" / "quarantine" / session
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                out.append(os.readlink(p))
            elif os.path.isfile(p) and name != "manifest.json":
                if os.path.getsize(p) > 1 << 20:
                    out.append(f"huge:{os.path.getsize(p)}")  # never read a sparse terabyte
                else:
                    out.append(Path(p).read_bytes())
    return out


@dataclass(frozen=True)
class Op:
    kind: str
    a: str = ""
    b: str = ""
    data: bytes = b""
    n: int = 0


contents = st.binary(min_size=0, max_size=300)
ops = st.one_of(
    st.builds(Op, st.just("create"), st.sampled_from(FILES), data=contents),
    st.builds(Op, st.just("append"), st.sampled_from(FILES), data=contents),
    st.builds(Op, st.just("truncate"), st.sampled_from(FILES), n=st.integers(0, 20)),
    st.builds(Op, st.just("delete"), st.sampled_from(FILES)),
    st.builds(Op, st.just("rename"), st.sampled_from(FILES), st.sampled_from(FILES)),
    st.builds(Op, st.just("chmod"), st.sampled_from(FILES + DIRS),
              n=st.sampled_from([0o600, 0o644, 0o700, 0o755])),
    st.builds(Op, st.just("symlink"), st.sampled_from(FILES + DIRS),
              st.sampled_from(["/etc/hostname", "../notes.txt", "a.md", "../../outside"])),
    st.builds(Op, st.just("dirmove"), st.sampled_from(DIRS), st.sampled_from(["moved", "docs2"])),
    st.builds(Op, st.just("big"), data=contents),
    st.builds(Op, st.just("plan"), data=contents),
    st.builds(Op, st.just("objrewrite")),
    st.builds(Op, st.just("lockout")),
    st.builds(Op, st.just("sparse")),
    st.builds(Op, st.just("objwipe")),
    st.builds(Op, st.just("swap"), data=contents),
    st.builds(Op, st.just("storepoison")),
    st.builds(Op, st.just("vanish")),
)
VANISHED = "*"  # what `vanish` touched: the whole worktree, its quarantine included


def apply(wt: Path, op: Op, store: Path) -> tuple[set[str], list[str]]:
    """Run one operation as the agent would. Returns (paths it touched, paths it produced)."""
    a, b = str(wt / op.a), str(wt / op.b)
    if op.kind == "create":
        fd = os.open(a, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, op.data)
        finally:
            os.close(fd)
        return {op.a}, [op.a]
    if op.kind == "append":
        with open(a, "ab") as f:
            f.write(op.data)
        return {op.a}, [op.a]
    if op.kind == "truncate":
        fd = os.open(a, os.O_WRONLY | os.O_NOFOLLOW)
        try:
            os.ftruncate(fd, op.n)
        finally:
            os.close(fd)
        return {op.a}, [op.a]
    if op.kind == "delete":
        os.unlink(a)
        return {op.a}, []
    if op.kind == "rename":
        os.rename(a, b)
        return {op.a, op.b}, [op.b]
    if op.kind == "chmod":
        if os.path.islink(a):
            raise OSError("a symlink's mode cannot be changed on Linux")
        os.chmod(a, op.n)
        return {op.a}, [op.a]
    if op.kind == "symlink":
        tmp = a + ".swap"
        os.symlink(op.b, tmp)
        try:
            os.rename(tmp, a)  # over a file, or ENOTDIR/EISDIR over a directory
        except OSError:
            os.unlink(tmp)
            raise
        return {op.a}, [op.a]
    if op.kind == "dirmove":
        dest = os.path.join(os.path.dirname(a), op.b)
        os.rename(a, dest)
        rel = os.path.relpath(dest, wt)
        produced = [os.path.relpath(os.path.join(d, f), wt)
                    for d, _, fs in os.walk(dest) for f in fs]
        return {op.a, rel}, produced
    if op.kind == "big":
        with open(wt / BIG, "ab") as f:
            f.write(op.data + b"!")
        return {BIG}, []
    if op.kind == "plan":
        (wt / PLAN).write_bytes(op.data)
        return {PLAN}, []
    if op.kind == "objrewrite":  # poison the restore source of src/app.py
        found = subprocess.run(["git", "-C", str(wt), "rev-parse", "HEAD:src/app.py"],
                               capture_output=True, text=True)
        if found.returncode != 0:
            raise OSError("git cannot read HEAD (the objects are being put back)")
        blob = found.stdout.strip()
        obj = wt / ".git" / "objects" / blob[:2] / blob[2:]
        os.chmod(obj, 0o644)
        obj.write_bytes(zlib.compress(b"blob %d\0" % len(POISON) + POISON))
        return set(), []
    if op.kind == "lockout":  # shut the quarantine (as the same user can)
        for d in (wt / ".openoxide" / "quarantine" / "model", wt / ".openoxide" / "quarantine"):
            if d.is_dir():
                os.chmod(d, 0o500)
        return set(), []
    if op.kind == "sparse":  # a terabyte of holes: never to be read whole
        with open(wt / HUGE, "wb") as f:
            f.truncate(1 << 40)
        return {HUGE}, []
    if op.kind == "objwipe":  # the repository's history
        subprocess.run(["rm", "-rf", str(wt / ".git" / "objects")], capture_output=True)
        return set(), []
    if op.kind == "swap":  # the worktree renamed away, a modified copy in its place
        copy, aside = wt.parent / "copy", wt.parent / "aside"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(wt, copy, symlinks=True, ignore_dangling_symlinks=True,
                        ignore=shutil.ignore_patterns("huge.bin"))
        (copy / "src").mkdir(exist_ok=True)
        (copy / "src" / "app.py").write_bytes(op.data)
        os.chmod(copy / "src" / "app.py", 0o4755)
        os.rename(wt, aside)
        os.rename(copy, wt)
        return set(), []
    if op.kind == "storepoison":  # guard's copies on disk (the agent runs as the user)
        # (the object database snapshot's hard links share the objects' inodes: writing
        # through them is objrewrite, which the model already runs)
        for dirpath, _, filenames in os.walk(store / "objects"):
            for name in filenames:
                with contextlib.suppress(OSError):
                    Path(dirpath, name).write_bytes(POISON)
        return set(), []
    if op.kind == "vanish":  # moved aside and deleted, quarantine and all
        aside = wt.parent / "gone"
        subprocess.run(["sh", "-c", f'mv "{wt}" "{aside}" && rm -rf "{aside}"'],
                       capture_output=True)
        return {VANISHED}, []
    raise AssertionError(op.kind)


def observe(wt: Path, rel: str) -> bytes | str | None:
    p = str(wt / rel)
    with contextlib.suppress(OSError):
        s = os.lstat(p)
        if stat.S_ISLNK(s.st_mode):
            return os.readlink(p)
        if stat.S_ISREG(s.st_mode) and s.st_size > 1 << 20:
            return f"huge:{s.st_size}"  # as quarantined() names it
        if stat.S_ISREG(s.st_mode):
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                return b"".join(iter(lambda: os.read(fd, 1 << 16), b""))
            finally:
                os.close(fd)
    return None


def touched_later(rel: str, later: list[set[str]]) -> bool:
    return any(t in (rel, VANISHED) or rel.startswith(t + "/") or t.startswith(rel + "/")
               for ts in later for t in ts)


@pytest.mark.parametrize("backend", ["fanotify", "inotify"])
@settings(max_examples=int(os.environ.get("GUARD_MODEL_EXAMPLES", "25")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(ops, min_size=1, max_size=15))
# as uid 65534 a directory shut by chmod 0600 hides what is in it (root sees through it):
# a file created there, and the scan walking into it
@example(sequence=[Op("sparse"), Op("chmod", "src", n=0o600)])
@example(sequence=[Op("lockout"), Op("chmod", "src", n=0o600)])
def test_restore_brings_back_the_baseline_and_keeps_every_violating_version(
    backend: str, sequence: list[Op],
) -> None:
    base = Path(tempfile.mkdtemp(prefix="guard-model-"))
    try:
        wt = make_worktree(base)
        before = snapshot(wt)
        head = subprocess.run(["git", "-C", str(wt), "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout
        m = Monitor(Guard.load(worktree=wt), "plan", restore=True, reconcile_interval=None,
                    size_cap=CAP, session="model", audit_path=base / "audit.jsonl",
                    backend=backend)
        m.start()
        try:
            assert any(n.event == "not-restorable" and BIG in n.message for n in m.notices)
            assert m.baseline_done.wait(60)
            touched: list[set[str]] = []
            seen: list[tuple[int, str, bytes | str]] = []
            plan: bytes | None = None
            swapped = big_in_tree = False
            for op in sequence:
                try:
                    t, produced = apply(wt, op, m.store)
                except OSError:
                    continue  # the path is gone (or the monitor is putting it back)
                touched.append(t)
                swapped = swapped or op.kind == "swap"
                # after a swap, until the monitor puts the tree back, the agent writes
                # into the copy standing at the path (it goes into quarantine whole)
                big_in_tree = big_in_tree or (op.kind == "big" and not swapped)
                if op.kind == "plan":
                    plan = op.data  # written into a swapped-in copy too: it is carried back
                if op.kind == "vanish":
                    plan = None  # deleting its own plan is the agent's right
                for rel in produced:
                    v = observe(wt, rel)
                    if v is not None:
                        seen.append((len(touched) - 1, rel, v))
            assert m.settle(), "the monitor did not settle"
            after = snapshot(wt)
            big_changed = any(op.kind == "big" for op in sequence)
            vanished = any(op.kind == "vanish" for op in sequence)
            kept = quarantined(wt, "model")
            if big_changed and not vanished:
                big_in_copy = any(isinstance(k, bytes) and len(k) > CAP * 2
                                  and k.startswith(b"B" * CAP * 2) for k in kept)
                assert any(v.path == str(wt / BIG) and "left in place" in v.action_taken
                           for v in m.violations) or (not big_in_tree and big_in_copy), (
                    _diff(before, after, m))
            if big_changed or vanished:
                before.pop(BIG)
                after.pop(BIG, None)
            rewritten = any(op.kind == "objrewrite" for op in sequence)
            unavailable = [v for v in m.violations if v.path == str(wt / "src/app.py")
                           and "original unavailable" in v.action_taken]
            if unavailable:
                assert rewritten, unavailable
                now = after.pop("src/app.py", None)
                before.pop("src/app.py")
                assert now is None or now[1] != POISON, "the poisoned object was restored"
            elif rewritten and vanished:
                after.pop("src/app.py", None)  # its blob's object was poisoned: never written
                before.pop("src/app.py")
            for rel, (_, data, _) in after.items():
                assert data != POISON, f"{rel}: the poisoned bytes were written"
            assert after == before, _diff(before, after, m)
            if not rewritten:
                git_now = subprocess.run(["git", "-C", str(wt), "rev-parse", "HEAD"],
                                         capture_output=True, text=True)
                assert git_now.stdout == head, _diff(before, after, m)
                fsck = subprocess.run(["git", "-C", str(wt), "fsck", "--full"],
                                      capture_output=True, text=True)
                assert fsck.returncode == 0, fsck.stderr + _diff(before, after, m)
            if plan is not None:
                assert (wt / PLAN).read_bytes() == plan, _diff(before, after, m)
            for idx, rel, version in seen:
                if touched_later(rel, touched[idx + 1 :]):
                    continue  # the agent itself changed it again
                original = before.get(rel)
                if original is not None and original[1] == version:
                    continue  # the baseline version (already back)
                assert version in kept, f"{rel}: version {version!r} lost; {m.violations}"
        finally:
            m.stop()
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(base)


def _diff(before: Snapshot, after: Snapshot, m: Monitor) -> str:
    lines = []
    for k in sorted(set(before) | set(after)):
        if before.get(k) != after.get(k):
            lines.append(f"{k}: baseline {before.get(k)!r} now {after.get(k)!r}")
    return "\n".join(lines) + f"\nviolations: {m.violations}\nnotices: {m.notices}"


def test_the_model_holds_as_an_unprivileged_user(request: pytest.FixtureRequest) -> None:
    """As root, the model runs again as uid 65534: the monitor then gets inotify (fanotify's
    filesystem mark needs CAP_SYS_ADMIN), its own files are that user's, and the
    non-dumpable held store is what keeps the copies from that user's other processes."""
    from tests.sandbox.unprivileged import as_user, reachable_dir, require_unprivileged

    require_unprivileged()
    checkout = Path(__file__).resolve().parents[2]
    work = reachable_dir("guard-model-nobody-", "nobody")
    try:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work),
               "TMPDIR": str(work), "PYTHONDONTWRITEBYTECODE": "1",
               "GUARD_MODEL_EXAMPLES": os.environ.get("GUARD_MODEL_EXAMPLES", "10"),
               **{k: v for k, v in os.environ.items() if k.startswith("GIT_")}}
        # the run's seed carries over, so a failure here reproduces with it
        given_seed = request.config.getoption("hypothesis_seed", None)
        seed = [f"--hypothesis-seed={given_seed}"] if given_seed is not None else []
        argv = as_user("nobody", [
            sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
            f"--rootdir={checkout}", "-c", str(checkout / "pyproject.toml"),
            f"--basetemp={work}/pytest", "-k", "inotify", *seed,
            f"{__file__}::test_restore_brings_back_the_baseline_and_keeps_every_violating_version",
        ])
        proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True,
                              timeout=3600)
        # all of it: the differing paths come first, the violations and notices after
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert " passed" in proc.stdout, proc.stdout
    finally:
        shutil.rmtree(work, ignore_errors=True)
