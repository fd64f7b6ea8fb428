"""Hypothesis properties of the evaluator with the shipped ``default`` policy.

The promise under test: the shipped ``plan`` agent never allows a write or a
delete whose real target is anything but a ``.md`` file directly in the plan
directory -- whatever path spelling reaches it (``..`` chains, symlinks on
disk pointing into and out of the plan directory, case variants such as
``.OpenOxide/PLANS``, unicode, very long names, trailing slashes, ``~``,
absolute and relative paths from several working directories). The oracle is
independent of guard: ``os.path.realpath`` on the path as the kernel would
see it.

Also: deciding never raises on arbitrary text, and a path holding a NUL or
another control character is always denied.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from guard import Action, Effect, EffectKind, Guard

SETTINGS = settings(
    max_examples=int(os.environ.get("GUARD_PROPERTY_EXAMPLES", "600")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@dataclass(frozen=True)
class World:
    guard: Guard
    repo: Path
    plans: Path
    home: Path
    outside: Path  # a directory beside the repository


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A real git worktree with symlinks that point into and out of the plan dir."""
    base = Path(os.path.realpath(tmp_path_factory.mktemp("prop")))
    repo = base / "repo"
    home = base / "home"
    outside = base / "outside"
    for d in (repo / "src", home, outside):
        d.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    plans = repo / ".openoxide" / "plans"
    plans.mkdir(parents=True)
    (plans / "p.md").write_text("# plan\n")
    (plans / "notes.txt").write_text("not a plan\n")
    (plans / "dir.md").mkdir()  # a directory named like a plan file
    (repo / ".openoxide" / "policy.toml.bak").write_text("")
    (repo / "src" / "app.py").write_text("print('hi')\n")
    (outside / "secret.md").write_text("outside\n")
    # symlinks inside the plan directory pointing out of it
    (plans / "out.md").symlink_to(repo / "src" / "app.py")
    (plans / "outdir").symlink_to(repo / "src")
    (plans / "escape.md").symlink_to(outside / "secret.md")
    (plans / "dangling.md").symlink_to(repo / "src" / "new.py")
    (plans / "up").symlink_to("..")
    (plans / "loop.md").symlink_to("loop.md")
    (plans / "in.md").symlink_to("p.md")  # inside, pointing inside
    # symlinks outside pointing in
    (repo / "src" / "plans-link").symlink_to(plans)
    (repo / "src" / "plan.md").symlink_to(plans / "p.md")
    (outside / "repo-link").symlink_to(repo)
    (home / "proj").symlink_to(repo)
    (home / "plans").symlink_to(plans)
    # a hard link to a plan file from outside (writing it changes src too)
    os.link(repo / "src" / "app.py", plans / "hard.md")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
        g = Guard.load("builtin:default", worktree=repo)
    assert g.roots.plans == plans
    assert g.roots.home == home
    yield World(g, repo, plans, home, outside)


@pytest.fixture(autouse=True)
def _world_home(_isolated_home: None, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """``~`` in generated paths must reach the world's home, with its symlinks."""
    monkeypatch.setenv("HOME", str(world.home))


SEGMENTS = [
    ".",
    "..",
    "../..",
    "src",
    ".openoxide",
    "plans",
    ".OpenOxide",
    "PLANS",
    "Plans",
    ".openoxide/plans",
    ".OPENOXIDE/plans",
    "p.md",
    "P.MD",
    "x.md",
    "x.MD",
    "notes.txt",
    "new.md",
    "dir.md",
    "out.md",
    "outdir",
    "escape.md",
    "dangling.md",
    "up",
    "loop.md",
    "in.md",
    "hard.md",
    "plans-link",
    "plan.md",
    "repo-link",
    "outside",
    "repo",
    "proj",
    "policy.toml",
    ".git",
    "hooks",
    "ünï.md",
    "\uff50.md",  # fullwidth p
    "plans\u200b",  # zero-width space
    "é.md",
    "a" * 255 + ".md",
    "b" * 300,
    ".md",
    "",
]


@st.composite
def spellings(draw: st.DrawFn, world: World) -> tuple[str, str]:
    """A (cwd, path) pair: a path spelling in one of the forms an agent may send."""
    parts = draw(st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=7))
    body = "/".join(parts)
    if draw(st.booleans()):
        body += "/"
    prefix = draw(
        st.sampled_from(
            [
                "",
                str(world.repo) + "/",
                str(world.plans) + "/",
                str(world.outside) + "/",
                "~/",
                "~/proj/",
                "~/plans/",
                "/",
                "//",
                "./",
            ]
        )
    )
    cwd = draw(
        st.sampled_from(
            [world.repo, world.plans, world.repo / "src", world.outside, world.repo / "missing"]
        )
    )
    return str(cwd), prefix + body


def real_target(path: str, cwd: str) -> str:
    """Where the kernel would write: the independent oracle."""
    expanded = os.path.expanduser(path) if path.startswith("~") else path
    return os.path.realpath(os.path.join(cwd, expanded))


def is_plan_file(real: str, plans: Path) -> bool:
    return os.path.dirname(real) == str(plans) and real.endswith(".md")


@SETTINGS
@given(data=st.data(), kind=st.sampled_from([EffectKind.WRITE, EffectKind.DELETE]))
def test_plan_agent_never_allows_a_write_or_delete_outside_the_plan_dir(
    world: World, data: st.DataObject, kind: EffectKind
) -> None:
    """Attack: reach a file outside {plans} through any spelling of its path --
    ``..``, symlinks (file and directory, dangling, looping), case variants,
    look-alike unicode, long names, ``~``, absolute or relative to another cwd."""
    cwd, path = data.draw(spellings(world))
    d = world.guard.decide("plan", [Effect(kind, path)], cwd=cwd)
    if d.action is not Action.ALLOW:
        return
    real = real_target(path, cwd)
    assert is_plan_file(real, world.plans), (
        f"{kind.value} {path!r} from {cwd} was allowed but really targets {real}: {d.reason}"
    )
    # the name the agent used must itself be in the plan dir too (link and target checked)
    expanded = os.path.expanduser(path) if path.startswith("~") else path
    full = os.path.join(cwd, expanded).rstrip("/")
    name = os.path.basename(full)
    if name not in ("", ".", ".."):
        link = os.path.join(os.path.realpath(os.path.dirname(full)), name)
        assert is_plan_file(link, world.plans), (path, cwd, link, d.reason)
    if kind is EffectKind.WRITE and os.path.isfile(real):
        # writing a file with other hard links would change those other paths too
        # (a directory's link count is its subdirectories, not hard links)
        assert os.stat(real).st_nlink == 1, (path, cwd, d.reason)


@pytest.mark.parametrize(
    ("cwd_rel", "path"),
    [
        ("", ".openoxide/plans/out.md"),
        ("", ".openoxide/plans/escape.md"),
        ("", ".openoxide/plans/dangling.md"),
        ("", ".openoxide/plans/outdir/x.md"),
        ("", ".openoxide/plans/up/policy.toml.bak"),
        ("", ".openoxide/plans/up/plans/../x.md"),
        ("", ".openoxide/plans/loop.md"),
        ("", ".openoxide/plans/hard.md"),
        ("", "src/plan.md"),
        ("", ".OpenOxide/PLANS/x.md"),
        ("", ".openoxide/plans/../x.md"),
        ("src", "../.openoxide/plans/../../src/app.py"),
    ],
)
def test_plan_agent_denies_known_escapes(world: World, cwd_rel: str, path: str) -> None:
    """Each named escape, pinned so a regression shows the spelling that got through."""
    d = world.guard.decide("plan", [Effect.write(path)], cwd=world.repo / cwd_rel)
    assert d.action is Action.DENY, d.reason


@pytest.mark.parametrize("path", ["dir.md/run.sh", "dir.md/x.md", "new.md/x.py", "p.md/src"])
@pytest.mark.parametrize("kind", [EffectKind.WRITE, EffectKind.DELETE])
def test_plan_agent_cannot_write_below_a_directory_named_like_a_plan(
    world: World, path: str, kind: EffectKind
) -> None:
    """Attack: ``mkdir .openoxide/plans/dir.md`` (a write to ``{plans}/*.md``), then
    write any file below it. In gitignore semantics ``{plans}/*.md`` matches the
    directory and so everything inside it; the plan agent must still be limited to
    ``.md`` files directly in the plan directory."""
    d = world.guard.decide("plan", [Effect(kind, path)], cwd=world.plans)
    assert d.action is Action.DENY, d.reason


@pytest.mark.parametrize(
    ("cwd_rel", "path"),
    [
        ("", ".openoxide/plans/p.md"),
        ("", ".openoxide/plans/new.md"),
        ("src", "../.openoxide/plans/new.md"),
        ("src", "plans-link/new.md"),
        ("", ".openoxide/plans/in.md"),
        ("", "~/plans/new.md"),
    ],
)
def test_plan_agent_allows_the_plan_file_however_spelled(
    world: World, cwd_rel: str, path: str
) -> None:
    """The property must not hold vacuously: the plan file itself stays writable."""
    d = world.guard.decide("plan", [Effect.write(path)], cwd=world.repo / cwd_rel)
    assert d.action is Action.ALLOW, d.reason


ANY_KIND = st.sampled_from(list(EffectKind))


@SETTINGS
@given(text=st.text(), kind=ANY_KIND, agent=st.sampled_from(["plan", "build"]))
@example(text="\x00", kind=EffectKind.WRITE, agent="plan")
@example(text="\udcff", kind=EffectKind.READ, agent="build")
@example(text="~nosuchuser_guard/x", kind=EffectKind.WRITE, agent="plan")
@example(text="a" * 5000, kind=EffectKind.DELETE, agent="plan")
def test_decide_never_raises_on_arbitrary_text(
    world: World, text: str, kind: EffectKind, agent: str
) -> None:
    """Attack: crash the evaluator (and so, in a careless host, fail open) with any
    string as a path, host name or tool name."""
    d = world.guard.decide(agent, [Effect(kind, text)], cwd=world.repo)
    assert d.action in (Action.ALLOW, Action.ASK, Action.DENY)
    assert d.reason
    single = world.guard.decide_effect(agent, Effect(kind, text), cwd=world.repo)
    assert single.action is d.action


@SETTINGS
@given(text=st.text(), agent=st.text())
def test_decide_never_raises_on_an_arbitrary_agent_name(
    world: World, text: str, agent: str
) -> None:
    """An unknown agent name is an error inside the decision: a deny, never a raise."""
    d = world.guard.decide(agent, [Effect.write(text)], cwd=world.repo)
    if agent not in world.guard.agent_names:
        assert d.action is Action.DENY


CONTROL = st.sampled_from([chr(c) for c in range(0x20)] + ["\x7f"])


@SETTINGS
@given(
    before=st.text(),
    control=CONTROL,
    after=st.text(),
    kind=st.sampled_from([EffectKind.READ, EffectKind.WRITE, EffectKind.DELETE, EffectKind.EXEC]),
    agent=st.sampled_from(["plan", "build"]),
    prefix=st.sampled_from(["", ".openoxide/plans/", "src/"]),
)
def test_control_character_in_a_path_is_always_denied(
    world: World, before: str, control: str, after: str, kind: EffectKind, agent: str, prefix: str
) -> None:
    """Attack: hide a newline or NUL in a path so that a log, a prompt or a C
    consumer sees a different name than the one decided -- even for the build
    agent, which reads and writes the worktree freely."""
    path = prefix + before + control + after
    d = world.guard.decide(agent, [Effect(kind, path)], cwd=world.repo)
    assert d.action is Action.DENY, d.reason
    assert "control character" in d.reason or "NUL" in d.reason, d.reason
