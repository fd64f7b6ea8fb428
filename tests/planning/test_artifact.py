from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.paths import PathError
from guard.planning import Session, list_plans, read_plan, slugify, write_plan
from guard.planning.artifact import ArtifactError, artifact_name

SAFE = re.compile(r"^[^\W_]+(-[^\W_]+)*$")


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_any_title_gives_a_safe_slug(title: str) -> None:
    slug = slugify(title)
    assert SAFE.match(slug), slug
    assert 1 <= len(slug) <= 48
    assert not any(c.isupper() for c in slug)
    assert all(c == "-" or c.isalnum() for c in slug)
    assert "/" not in slug and ".." not in slug and slug not in (".", "..")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("./\\~-_ \x00\n\t…éÅ語a1")), max_size=80))
def test_path_like_titles_never_give_path_like_slugs(title: str) -> None:
    """Attack: titles crafted to put the plan file elsewhere (../, absolute, NUL, newlines)."""
    slug = slugify(title)
    assert SAFE.match(slug), slug


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Add caching to the Index!", "add-caching-to-the-index"),
        ("Résumé parsing — v2", "résumé-parsing-v2"),
        ("Добавить кэш", "добавить-кэш"),
        ("\uff26\uff55\uff4c\uff4c\uff0f\uff57\uff49\uff44\uff54\uff48", "full-width"),
        ("a\u202eb\u200dc", "a-b-c"),
        ("../../etc/passwd", "etc-passwd"),
        ("", "plan"),
        (None, "plan"),
        ("日本語", "日本語"),
        ("a" * 100, "a" * 48),
        ("x" * 47 + " yz", "x" * 47),
    ],
)
def test_slug_examples(title: str | None, slug: str) -> None:
    assert slugify(title) == slug


def test_artifact_name_format() -> None:
    when = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert artifact_name("s1", "My Plan", when) == "20260304T050607Z-s1-my-plan.md"


def test_write_plan_is_atomic_and_inside_plans(plan_session: Session) -> None:
    path = write_plan(plan_session, "# Plan\n\nstep")
    assert str(path) == plan_session.plan_path
    assert path.read_text() == "# Plan\n\nstep\n"
    write_plan(plan_session, "# Plan v2\n")
    assert read_plan(plan_session) == "# Plan v2\n"
    leftovers = [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
    assert re.match(
        r"^\d{8}T\d{6}Z-" + re.escape(plan_session.id) + r"-add-a-greeting\.md$", path.name
    )


def test_write_plan_replaces_a_symlink_instead_of_following_it(
    plan_session: Session, tmp_path: Path
) -> None:
    """Attack: a symlink planted at the plan path to make guard write a file elsewhere."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    assert plan_session.plan_path
    Path(plan_session.plan_path).symlink_to(victim)
    write_plan(plan_session, "# plan\n")
    assert victim.read_text() == "precious"
    assert not Path(plan_session.plan_path).is_symlink()


def test_write_plan_refuses_a_symlinked_plans_dir(repo: Path, tmp_path: Path) -> None:
    """Attack: .openoxide/plans replaced by a link pointing outside the worktree."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / ".openoxide").mkdir()
    (repo / ".openoxide" / "plans").symlink_to(outside)
    # refused when the plan directory is discovered (guard.paths.check_plan_dir), or at the
    # latest when the plan is written
    with pytest.raises((ArtifactError, PathError), match="symlink"):
        s = Session.start(repo, "plan", title="x")
        write_plan(s, "# plan\n")
    assert list(outside.iterdir()) == []


def test_write_plan_refuses_a_tampered_plan_path(plan_session: Session, tmp_path: Path) -> None:
    """Attack: a session whose plan_path was edited to point outside {plans}."""
    for bad in (
        str(tmp_path / "x.md"),
        os.path.join(plan_session.plans_dir, "..", "x.md"),
        os.path.join(plan_session.plans_dir, "sub", "x.md"),
        os.path.join(plan_session.plans_dir, ".hidden.md"),
        os.path.join(plan_session.plans_dir, "notes.txt"),
    ):
        plan_session.plan_path = bad
        with pytest.raises(ArtifactError, match="refusing"):
            write_plan(plan_session, "# plan\n")
        assert not Path(bad).exists()


def test_write_plan_without_plan_mode_is_refused(session: Session) -> None:
    with pytest.raises(ArtifactError, match="enter plan mode first"):
        write_plan(session, "# plan")


def test_plan_artifact_without_vcs_goes_to_data_dir(plain_dir: Path) -> None:
    from guard.paths import data_dir, project_key

    s = Session.start(plain_dir, "plan", title="Fallback")
    path = write_plan(s, "# fallback\n")
    assert path.parent == data_dir() / "plans" / project_key(plain_dir)
    assert [a.path for a in list_plans(plain_dir)] == [path]


def test_list_plans_names_owner_sessions(repo: Path) -> None:
    a = Session.start(repo, "plan", title="first")
    b = Session.start(repo, "plan", title="second-with-hyphens")
    write_plan(a, "# a\n")
    write_plan(b, "# b\n")
    (Path(a.plans_dir) / "README.txt").write_text("not a plan")
    found = list_plans(repo)
    assert {(p.session, p.path.name) for p in found} == {
        (a.id, Path(str(a.plan_path)).name),
        (b.id, Path(str(b.plan_path)).name),
    }
