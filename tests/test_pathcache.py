"""The canonical-path cache (guard/pathcache.py) never answers from an older disk.

Each attack asks about a path while the cache is active (so the answer is kept),
changes the disk the way an agent could between two tool calls, and asks again:
the second answer must be the fresh resolver's, and decisions must follow it.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from guard import pathcache
from guard.decide import Guard
from guard.effects import Effect, EffectKind
from guard.pathcache import (
    ACTIVATE_AFTER,
    CACHE,
    LOCAL_TYPES,
    MAX_WATCHES,
    foreign_mounts,
    on_foreign_mount,
    watch_budget,
)
from guard.paths import CanonicalPath, PathError, _resolve, canonicalize, warm_path_cache

SEED = int(os.environ.get("GUARD_DIFF_SEED", "1"))


@pytest.fixture(autouse=True)
def active_cache() -> Iterator[None]:
    """A fresh cache, already past its activation count."""
    CACHE.reset()
    for _ in range(ACTIVATE_AFTER):
        CACHE.prepare(("", ""), "/proc/x")  # counts towards activation, keeps nothing
    assert CACHE.prepare(("", ""), "/proc/x") is None
    yield
    CACHE.reset()


def ask(path: str, cwd: Path) -> CanonicalPath:
    """Resolve twice: a path is kept from its second resolution on."""
    canonicalize(path, cwd)
    return canonicalize(path, cwd)


def kept(path: str, cwd: Path) -> bool:
    return (path, str(cwd)) in CACHE._entries


def fresh(path: str, cwd: Path) -> CanonicalPath | str:
    try:
        return _resolve(path, cwd, write=False)
    except PathError as exc:
        return f"error: {exc}"


def cached(path: str, cwd: Path) -> CanonicalPath | str:
    try:
        return canonicalize(path, cwd)
    except PathError as exc:
        return f"error: {exc}"


def test_a_plain_answer_is_kept_and_given_again(tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path))
    (root / "a/b").mkdir(parents=True)
    (root / "a/b/f.py").write_text("x")
    for path in (".", "./a/./b", "a/b/."):
        assert ask(path, root) == fresh(path, root)
        assert kept(path, root), path
    assert canonicalize("a/b/f.py", root) == fresh("a/b/f.py", root)
    assert not kept("a/b/f.py", root)  # asked about once: nothing watched, nothing kept
    first = canonicalize("a/b/f.py", root)
    assert kept("a/b/f.py", root)
    assert canonicalize("a/b/f.py", root) is first
    assert first.real == str(root / "a/b/f.py") and first.nlink == 1


def test_answers_through_links_dots_or_proc_are_not_kept(tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path))
    (root / "d").mkdir()
    os.symlink("d", root / "l")
    for path in ("l/x", "d/../d/x", "l/.", "/proc/self/status", "~/x"):
        ask(path, root)
        assert not kept(path, root), path


def test_directory_swapped_for_a_symlink_between_calls(tmp_path: Path) -> None:
    """Attack: ask about plans/x.md while plans is a directory (the answer is kept),
    then rename it away and put a symlink to src in its place."""
    root = Path(os.path.realpath(tmp_path))
    (root / "plans").mkdir()
    (root / "src").mkdir()
    assert ask("plans/x.md", root).real == str(root / "plans/x.md")
    assert kept("plans/x.md", root)
    os.rename(root / "plans", root / "old")
    os.symlink("src", root / "plans")
    second = canonicalize("plans/x.md", root)
    assert second.real == str(root / "src/x.md")
    assert second == fresh("plans/x.md", root)
    assert not (root / "src/x.md").exists()


def test_ancestor_renamed_and_replaced_by_a_link(tmp_path: Path) -> None:
    """Attack: the file keeps its inode and name; only a directory two levels up
    moves and a link takes its place, so the real path changes under the same text."""
    root = Path(os.path.realpath(tmp_path))
    (root / "w/a/b").mkdir(parents=True)
    (root / "w/a/b/f.md").write_text("x")
    assert ask("a/b/f.md", root / "w").real == str(root / "w/a/b/f.md")
    assert kept("a/b/f.md", root / "w")
    os.rename(root / "w/a", root / "w/z")
    os.symlink("z", root / "w/a")
    second = canonicalize("a/b/f.md", root / "w")
    assert second.real == str(root / "w/z/b/f.md")
    assert second.link != second.real or second.real == fresh("a/b/f.md", root / "w").real


def test_hard_link_made_after_the_answer_was_kept(tmp_path: Path) -> None:
    """Attack: a plan file is asked about (nlink 1, kept), then hard-linked into the
    source tree; the plan-mode write must now be denied as a hard link."""
    repo = Path(os.path.realpath(tmp_path))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    plans = repo / ".openoxide/plans"
    plans.mkdir(parents=True)
    (plans / "p.md").write_text("# plan\n")
    (repo / "src").mkdir()
    g = Guard.load("builtin:default", worktree=repo)
    write = Effect(EffectKind.WRITE, ".openoxide/plans/p.md")
    assert g.decide_effect("plan", write, repo).allowed
    assert g.decide_effect("plan", write, repo).allowed
    assert kept(".openoxide/plans/p.md", repo)
    os.link(plans / "p.md", repo / "src/app.py")
    d = g.decide_effect("plan", write, repo)
    assert not d.allowed and d.rule == "guard.hardlink", d
    assert (repo / "src/app.py").read_text() == "# plan\n"  # nothing was written


def test_plan_directory_swapped_for_a_link_into_the_sources_is_denied(tmp_path: Path) -> None:
    """Attack on a decision: a plan file write is allowed and its answer kept; the plan
    directory is then replaced by a link into src/, and the same write must be denied."""
    repo = Path(os.path.realpath(tmp_path))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    plans = repo / ".openoxide/plans"
    plans.mkdir(parents=True)
    (repo / "src").mkdir()
    g = Guard.load("builtin:default", worktree=repo)
    write = Effect(EffectKind.WRITE, ".openoxide/plans/main.py")
    assert g.decide_effect("plan", write, repo).allowed is False  # not a .md: denied anyway
    write = Effect(EffectKind.WRITE, ".openoxide/plans/x.md")
    assert g.decide_effect("plan", write, repo).allowed
    assert g.decide_effect("plan", write, repo).allowed
    assert kept(".openoxide/plans/x.md", repo)
    os.rename(plans, repo / ".openoxide/old")
    os.symlink("../src", plans)
    d = g.decide_effect("plan", write, repo)
    assert not d.allowed, d
    assert not (repo / "src/x.md").exists()


def test_missing_path_created_as_a_directory(tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path))
    first = ask("new/deeper/x", root)
    assert kept("new/deeper/x", root) and first.mode == 0
    (root / "new/deeper/x").mkdir(parents=True)
    second = canonicalize("new/deeper/x", root)
    assert second.is_dir and second == fresh("new/deeper/x", root)


def test_file_replaced_by_a_symlink_of_the_same_name(tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path))
    (root / "f.md").write_text("x")
    (root / "secret").write_text("s")
    assert ask("f.md", root).link == str(root / "f.md")
    assert kept("f.md", root)
    os.unlink(root / "f.md")
    os.symlink("secret", root / "f.md")
    second = canonicalize("f.md", root)
    assert second.real == str(root / "secret") and second.link == str(root / "f.md")


def test_a_forked_child_starts_over(tmp_path: Path) -> None:
    """The inotify queue would be shared with the parent: the child must not use it."""
    root = Path(os.path.realpath(tmp_path))
    (root / "f").write_text("x")
    ask("f", root)
    assert kept("f", root)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        ok = CACHE._kernel is None and not CACHE._entries
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    assert os.read(r, 1) == b"1"
    os.close(r)
    os.waitpid(pid, 0)
    assert kept("f", root)  # the parent's cache is untouched


def test_mount_on_a_directory_of_the_path_is_seen(tmp_path: Path) -> None:
    """A mount changes what a path names without any directory entry changing."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting needs root and mount(8)")
    root = Path(os.path.realpath(tmp_path))
    (root / "m").mkdir()
    (root / "m/f").mkdir()
    assert ask("m/f", root).is_dir
    assert kept("m/f", root)
    proc = subprocess.run(["mount", "-t", "tmpfs", "none", str(root / "m")], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount here: {proc.stderr.decode().strip()}")
    try:
        second = canonicalize("m/f", root)
        assert second.mode == 0 and not second.is_dir  # hidden by the mount
    finally:
        subprocess.run(["umount", str(root / "m")], check=True)


@pytest.mark.parametrize("seed", [SEED, SEED + 1, SEED + 2])
def test_cached_answers_equal_fresh_ones_through_random_changes(
    tmp_path: Path, seed: int
) -> None:
    """Differential: after every random change (renames, link swaps, removals, hard
    links, creations), every path answers as the uncached resolver does."""
    rng = random.Random(seed)
    root = Path(os.path.realpath(tmp_path))
    names = ["a", "b", "c", "f.md", "g.py"]
    parts = [*names, *names, ".", ".."]
    paths = sorted({"/".join(rng.choice(parts) for _ in range(rng.randint(1, 4)))
                    for _ in range(40)})
    for d in ("a", "a/b", "b", "c/a"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for f in ("a/f.md", "a/b/g.py", "b/f.md"):
        (root / f).write_text("x")
    hits = 0
    for step in range(120):
        for p in paths:
            before = kept(p, root)
            got, want = cached(p, root), fresh(p, root)
            assert got == want, f"step {step}: {p!r}: cached {got}, fresh {want}"
            hits += before
        _mutate(root, rng, names)
    assert hits > 100  # the cache answered often: the comparison proves something


def _mutate(root: Path, rng: random.Random, names: list[str]) -> None:
    here = root / "/".join(rng.choice(names) for _ in range(rng.randint(1, 3)))
    other = root / "/".join(rng.choice(names) for _ in range(rng.randint(1, 3)))
    op = rng.randrange(7)
    try:
        if op == 0:
            os.rename(here, other)
        elif op == 1:
            if here.is_symlink() or here.is_file():
                here.unlink()
            elif here.is_dir():
                shutil.rmtree(here)
        elif op == 2:
            os.symlink(os.path.relpath(other, here.parent), here)
        elif op == 3:
            here.mkdir(parents=True)
        elif op == 4:
            os.link(other, here)
        elif op == 5:
            here.write_text("y")
        else:
            here.chmod(0o600)
    except OSError:
        pass


def test_a_change_elsewhere_keeps_the_answer_a_change_on_its_way_drops_it(
    tmp_path: Path,
) -> None:
    """Busy directories on the way (``/tmp``, a home directory) must not empty the
    cache: only a change to a name the answer went through drops it."""
    root = Path(os.path.realpath(tmp_path))
    (root / "a/b").mkdir(parents=True)
    (root / "a/b/f.md").write_text("x")
    ask("a/b/f.md", root)
    (root / "unrelated.txt").write_text("y")  # a sibling of a, in a watched directory
    (root / "a/other").mkdir()
    assert canonicalize("a/b/f.md", root) is not None and kept("a/b/f.md", root)
    os.rename(root / "a/b", root / "a/c")
    assert not kept("a/b/f.md", root) or canonicalize("a/b/f.md", root).mode == 0
    assert canonicalize("a/b/f.md", root) == fresh("a/b/f.md", root)


# local filesystems only ---------------------------------------------------------

MOUNTINFO = b"""\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
40 27 0:40 / /home/u/nfs rw,relatime shared:7 master:2 - nfs4 srv:/export rw,vers=4.2
41 27 0:41 / /home/u/my\\040share rw,relatime - cifs //srv/share rw
42 27 0:42 / /mnt/back\\134slash rw - fuse.sshfs u@h:/ rw
43 27 0:43 /sub /srv/bound rw - 9p hostshare rw,trans=virtio
44 27 0:44 / /srv/vfs rw - virtiofs tag rw
45 27 0:45 / /srv/ceph rw - ceph 10.0.0.1:/ rw
46 27 0:46 / /tank rw - zfs tank rw
47 27 0:47 / /work rw - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w
48 27 0:48 / /scratch rw - tmpfs tmpfs rw
49 27 0:49 / /data rw - xfs /dev/vdb rw
50 49 0:50 / /data/btr rw - btrfs /dev/vdc rw
"""


def test_mount_types_not_known_to_report_every_change_are_foreign() -> None:
    """Network, cluster and userspace filesystems (another host, the server or a FUSE
    daemon changes them without inotify seeing it), zfs (rollback and receive change
    a mounted dataset in place) and pseudo filesystems are foreign; escaped mount
    points (``\\040`` space, ``\\134`` backslash) are decoded."""
    foreign = foreign_mounts(MOUNTINFO)
    assert foreign == {
        "/proc", "/home/u/nfs", "/home/u/my share", "/mnt/back\\slash", "/srv/bound",
        "/srv/vfs", "/srv/ceph", "/tank",
    }
    for path in ("/home/u/nfs", "/home/u/nfs/a/b.md", "/home/u/my share/x",
                 "/mnt/back\\slash/p", "/srv/bound/plans/x.md", "/srv/vfs/a",
                 "/srv/ceph/a", "/tank/repo/src/app.py", "/proc/self"):
        assert on_foreign_mount(path, foreign), path
    for path in ("/", "/home/u/nfsx/a", "/home/u/my", "/work/repo/a.md", "/scratch/a",
                 "/data/btr/x", "/data/a", "/srv/boundary/a", "/home/u"):
        assert not on_foreign_mount(path, foreign), path
    assert {"ext4", "xfs", "btrfs", "tmpfs", "overlay"} <= LOCAL_TYPES
    assert not {"nfs", "nfs4", "cifs", "smb3", "9p", "virtiofs", "ceph", "zfs",
                "fuse", "fuse.sshfs", "fuseblk", "proc", "sysfs"} & LOCAL_TYPES


def test_a_foreign_root_or_an_unreadable_mount_table_keeps_nothing() -> None:
    on_nfs = b"27 1 0:50 / / rw - nfs srv:/root rw\n"
    assert on_foreign_mount("/home/u/x", foreign_mounts(on_nfs))
    for bad in (b"27 1 0:50 / / rw ext4 /dev/vda rw\n",  # no separator
                b"27 1 0:50\n",
                b"27 1 0:50 / relative rw - ext4 /dev/vda rw\n"):
        assert foreign_mounts(bad) == {"/"}, bad
        assert on_foreign_mount("/home/u/x", foreign_mounts(bad))
    assert not on_foreign_mount("/home/u/x", foreign_mounts(b""))


def _mount(args: list[str], where: Path) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting needs root and mount(8)")
    proc = subprocess.run(["mount", *args, str(where)], capture_output=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount here: {proc.stderr.decode().strip()}")


@pytest.mark.parametrize("fstype", ["proc", "sysfs", "mqueue", "devpts"])
def test_a_path_on_a_mount_of_a_type_not_listed_is_never_kept(
    tmp_path: Path, fstype: str
) -> None:
    """A real mount of a type not in the list (here pseudo filesystems, which stand
    in for NFS/FUSE/9p that cannot be mounted here) under a directory whose name needs
    escaping in mountinfo, reached directly and through a bind mount: nothing under
    either is kept, while a plain directory beside them still is."""
    root = Path(os.path.realpath(tmp_path))
    (root / "plain").mkdir()
    (root / "plain/f.md").write_text("x")
    where = root / "my mnt\\x"  # mountinfo writes it my\040mnt\134x
    where.mkdir()
    bound = root / "bound"
    bound.mkdir()
    _mount(["-t", fstype, "none"], where)
    try:
        proc = subprocess.run(["mount", "--bind", str(where), str(bound)], capture_output=True)
        assert proc.returncode == 0, proc.stderr
        try:
            names = [*sorted(os.listdir(where))[:3], "missing"]
            for base in (where, bound):
                for name in ["", *names]:
                    path = str(base / name) if name else str(base)
                    first = ask(path, root)
                    assert first == fresh(path, root)
                    assert not kept(path, root), path
            assert ask("plain/f.md", root) == fresh("plain/f.md", root)
            assert kept("plain/f.md", root)
        finally:
            subprocess.run(["umount", str(bound)], check=True)
    finally:
        subprocess.run(["umount", str(where)], check=True)


def test_a_path_on_tmpfs_is_kept_and_one_mounted_over_later_is_dropped(tmp_path: Path) -> None:
    """tmpfs is local: its paths are kept. Mounting a type not listed over a kept
    path's directory afterwards drops the answer and keeps nothing there."""
    root = Path(os.path.realpath(tmp_path))
    (root / "t").mkdir()
    _mount(["-t", "tmpfs", "none"], root / "t")
    try:
        (root / "t/d").mkdir()
        (root / "t/d/f.md").write_text("x")
        assert ask("t/d/f.md", root) == fresh("t/d/f.md", root)
        assert kept("t/d/f.md", root)
        proc = subprocess.run(["mount", "-t", "mqueue", "none", str(root / "t/d")],
                              capture_output=True)
        assert proc.returncode == 0, proc.stderr
        try:
            for _ in range(3):
                got = canonicalize("t/d/f.md", root)
                assert got == fresh("t/d/f.md", root) and got.mode == 0  # hidden
                assert not kept("t/d/f.md", root)
        finally:
            subprocess.run(["umount", str(root / "t/d")], check=True)
        assert ask("t/d/f.md", root).mode != 0
        assert kept("t/d/f.md", root)
    finally:
        subprocess.run(["umount", str(root / "t")], check=True)


def _kernel_watches() -> int:
    """Watches the cache's inotify instance holds, as the kernel lists them."""
    k = CACHE._kernel
    assert k is not None
    with open(f"/proc/self/fdinfo/{k.fd}") as f:
        return sum(line.startswith("inotify wd:") for line in f)


def test_watch_budget_is_a_small_share_of_the_users_limit() -> None:
    with open("/proc/sys/fs/inotify/max_user_watches") as f:
        limit = int(f.read())
    assert watch_budget() == min(MAX_WATCHES, limit // 16)
    assert watch_budget() <= limit // 16


def test_the_cache_never_holds_more_watches_than_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many distinct paths: the kernel's own count of the cache's watches stays within
    the budget (it starts over instead), and every answer is still the fresh one."""
    monkeypatch.setattr(pathcache, "MAX_WATCHES", 24)
    CACHE._restart()  # takes the budget afresh
    assert CACHE._budget == 24
    root = Path(os.path.realpath(tmp_path))
    for i in range(40):
        (root / f"d{i}").mkdir()
        (root / f"d{i}/f.md").write_text("x")
    high = 0
    for rnd in range(2):
        for i in range(40):
            path = f"d{i}/f.md"
            assert ask(path, root) == fresh(path, root)
            if CACHE._kernel is not None:
                high = max(high, _kernel_watches())
                assert _kernel_watches() <= 24, (rnd, i)
    assert high > 12  # the budget was actually approached
    assert kept("d39/f.md", root)


def test_a_long_lived_process_warms_the_cache_at_start_and_still_sees_swaps(
    tmp_path: Path,
) -> None:
    """The MCP proxy starts the cache at start-up and watches the way to its working
    directory then (warm_path_cache), so no call pays for the first watches. Attack: the
    worktree's src is swapped for a link to elsewhere after an answer below it was kept;
    the watches taken at start-up must report it like any other."""
    CACHE.reset()  # a fresh process: not active, nothing watched
    root = Path(os.path.realpath(tmp_path))
    (root / "w/src").mkdir(parents=True)
    (root / "elsewhere").mkdir()
    warm_path_cache(str(root / "w"))
    assert CACHE._kernel is not None  # active before any call reached ACTIVATE_AFTER
    assert kept(str(root / "w"), root / "w")
    assert ask("src/f.py", root / "w").real == str(root / "w/src/f.py")
    assert kept("src/f.py", root / "w")
    os.rename(root / "w/src", root / "w/old")
    os.symlink(root / "elsewhere", root / "w/src")
    second = canonicalize("src/f.py", root / "w")
    assert second.real == str(root / "elsewhere/f.py")
    assert second == fresh("src/f.py", root / "w")


def test_warming_a_disabled_or_unusable_cache_keeps_nothing(tmp_path: Path) -> None:
    CACHE.reset()
    CACHE.enabled = False
    try:
        root = Path(os.path.realpath(tmp_path))
        warm_path_cache(str(root))
        assert CACHE._kernel is None and not kept(str(root), root)
        warm_path_cache(str(root / "missing\0name"))  # not a path: left to the calls
    finally:
        CACHE.enabled = True
