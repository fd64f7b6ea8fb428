"""Model-based test of `--restore`: whatever the plan agent does, the worktree comes back.

Hypothesis generates sequences of agent operations (create, modify, append,
truncate, delete, rename across directories, chmod, symlink swap, directory
rename, writing a file over the copy cap, writing the plan, rewriting the git object
that holds the baseline of src/app.py, chmod-ing the quarantine shut, creating a
terabyte-sized sparse file). They run for real
against a real git worktree while the monitor (restore on) watches. Once the
monitor has settled (:meth:`Monitor.settle`: every event handled, no file
waiting, a clean reconciliation scan — a condition, never a sleep):

* the worktree equals the baseline byte for byte (content, mode, symlink
  targets, directory modes), except the plan file (allowed: the last version
  written) and the file over the copy cap (announced at start as not
  restorable; a change to it is reported and left in place) and src/app.py when its
  restore said "original unavailable" (its object was rewritten after the agent had
  changed the file): then it must not hold the object's poisoned bytes;
* every violating version the agent left behind (observed right after the
  operation that produced it, and not changed by a later operation of the agent
  itself) is in quarantine, byte for byte.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
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
)


def apply(wt: Path, op: Op) -> tuple[set[str], list[str]]:
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
        blob = subprocess.run(["git", "-C", str(wt), "rev-parse", "HEAD:src/app.py"],
                              check=True, capture_output=True, text=True).stdout.strip()
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
    return any(t == rel or rel.startswith(t + "/") or t.startswith(rel + "/")
               for ts in later for t in ts)


@settings(max_examples=int(os.environ.get("GUARD_MODEL_EXAMPLES", "25")), deadline=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(ops, min_size=1, max_size=15))
def test_restore_brings_back_the_baseline_and_keeps_every_violating_version(
    sequence: list[Op],
) -> None:
    base = Path(tempfile.mkdtemp(prefix="guard-model-"))
    try:
        wt = make_worktree(base)
        before = snapshot(wt)
        m = Monitor(Guard.load(worktree=wt), "plan", restore=True, reconcile_interval=None,
                    size_cap=CAP, session="model", audit_path=base / "audit.jsonl")
        m.start()
        try:
            assert any(n.event == "not-restorable" and BIG in n.message for n in m.notices)
            touched: list[set[str]] = []
            seen: list[tuple[int, str, bytes | str]] = []
            plan: bytes | None = None
            for op in sequence:
                try:
                    t, produced = apply(wt, op)
                except OSError:
                    continue  # the path is gone (or the monitor is putting it back)
                touched.append(t)
                if op.kind == "plan":
                    plan = op.data
                for rel in produced:
                    v = observe(wt, rel)
                    if v is not None:
                        seen.append((len(touched) - 1, rel, v))
            assert m.settle(), "the monitor did not settle"
            after = snapshot(wt)
            big_changed = any(op.kind == "big" for op in sequence)
            if big_changed:
                assert any(v.path == str(wt / BIG) and "left in place" in v.action_taken
                           for v in m.violations)
                before.pop(BIG)
                after.pop(BIG)
            unavailable = [v for v in m.violations if v.path == str(wt / "src/app.py")
                           and "original unavailable" in v.action_taken]
            if unavailable:
                assert any(op.kind == "objrewrite" for op in sequence), unavailable
                now = after.pop("src/app.py", None)
                before.pop("src/app.py")
                assert now is None or now[1] != POISON, "the poisoned object was restored"
            for rel, (_, data, _) in after.items():
                assert data != POISON, f"{rel}: the poisoned object's bytes were written"
            assert after == before, _diff(before, after, m)
            if plan is not None:
                assert (wt / PLAN).read_bytes() == plan
            kept = quarantined(wt, "model")
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
