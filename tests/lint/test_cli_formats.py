"""`guard lint` through the real entry point: formats, exit codes, configuration."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from guard.lint import RULES, lint_paths
from guard.lint.formats import GithubFormatter, SarifFormatter

from .helpers import guard

SARIF_SCHEMA = Path(__file__).parent / "data" / "sarif-2.1.0-rtm.5.json"

ERRORS = """version = 1
[agents.plan]
mode = "plan"
default = "deny"
[agents.plan.write]
allow = ["**/*.md"]
"""
WARNINGS_ONLY = """version = 1
[agents.build]
mode = "build"
default = "ask"
[agents.build.tools]
request_user_input = "deny"
[agents.build.read]
deny = ["/etc/shadow"]
"""
CLEAN = """version = 1
[agents.build]
mode = "build"
default = "ask"
[agents.build.tools]
request_user_input = "deny"
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in (("errors", ERRORS), ("warnings", WARNINGS_ONLY), ("clean", CLEAN)):
        p = tmp_path / f"{name}.toml"
        p.write_text(text)
        out[name] = p
    return out


def test_exit_0_when_clean(files: dict[str, Path]) -> None:
    r = guard("lint", str(files["clean"]))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "No findings" in r.stdout


def test_exit_3_with_errors_and_located_output(files: dict[str, Path]) -> None:
    r = guard("lint", str(files["errors"]))
    assert r.returncode == 3
    assert "errors.toml:6: GL204 error" in r.stdout
    assert "fix:" in r.stdout


def test_fail_level_warning_lowers_the_bar(files: dict[str, Path]) -> None:
    assert guard("lint", str(files["warnings"])).returncode == 0
    r = guard("lint", "--fail-level", "warning", str(files["warnings"]))
    assert r.returncode == 3 and "GL106 warning" in r.stdout


@pytest.mark.parametrize(
    "args",
    [["/nonexistent/policy.toml"], ["--format", "nope", "x.toml"], ["--explain", "GL999"]],
)
def test_exit_2_for_unusable_input(tmp_path: Path, args: list[str]) -> None:
    r = guard("lint", *args, cwd=tmp_path)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr


def test_unreadable_file_is_exit_2_not_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b"version = 1\n# caf\xe9\n")
    r = guard("lint", str(bad))
    assert r.returncode == 2 and "not UTF-8" in r.stderr and "Traceback" not in r.stderr


def test_empty_directory_is_exit_2(tmp_path: Path) -> None:
    r = guard("lint", str(tmp_path))
    assert r.returncode == 2 and "no policy files" in r.stderr


def test_invalid_toml_is_a_located_gl001(tmp_path: Path) -> None:
    p = tmp_path / "broken.toml"
    p.write_text('version = 1\n[agents.plan\nmode = "plan"\n')
    r = guard("lint", "--format", "json", str(p))
    assert r.returncode == 3
    (f,) = json.loads(r.stdout)["findings"]
    assert f["code"] == "GL001" and f["line"] == 2 and "invalid TOML" in f["message"]


def test_json_format(files: dict[str, Path]) -> None:
    r = guard("lint", "--format", "json", str(files["errors"]), str(files["clean"]))
    data = json.loads(r.stdout)
    assert data["summary"]["files"] == 2 and data["summary"]["errors"] >= 1
    assert {"code", "name", "level", "file", "line", "message", "fix", "help"} <= set(
        data["findings"][0]
    )


def test_sarif_validates_against_the_official_schema(files: dict[str, Path]) -> None:
    schema = json.loads(SARIF_SCHEMA.read_text())
    report = lint_paths([str(p) for p in files.values()])
    assert report.findings
    log = json.loads(SarifFormatter().format(report))
    jsonschema.Draft4Validator(schema).validate(log)
    run = log["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == list(RULES)
    for result in run["results"]:
        assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"]


def test_sarif_of_a_clean_run_validates(files: dict[str, Path]) -> None:
    schema = json.loads(SARIF_SCHEMA.read_text())
    r = guard("lint", "--format", "sarif", str(files["clean"]))
    assert r.returncode == 0
    jsonschema.Draft4Validator(schema).validate(json.loads(r.stdout))


def test_the_schema_check_can_fail() -> None:
    """The vendored schema really constrains: a result without a message is rejected."""
    schema = json.loads(SARIF_SCHEMA.read_text())
    bad = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}},
                                         "results": [{"ruleId": "GL201"}]}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(schema).validate(bad)


def test_github_annotations_escape_properties(tmp_path: Path) -> None:
    p = tmp_path / "a,b:c.toml"
    p.write_text(ERRORS)
    out = GithubFormatter().format(lint_paths([str(p)]))
    line = next(ln for ln in out.splitlines() if "GL204" in ln)
    assert line.startswith("::error file=")
    assert "a%2Cb%3Ac.toml" in line and ",line=6," in line


def test_pyproject_config_levels_and_ignores(files: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.guard.lint]\nignore = ["GL204"]\n[tool.guard.lint.levels]\nGL106 = "error"\n'
    )
    r = guard("lint", "--format", "json", "errors.toml", "warnings.toml", cwd=tmp_path)
    found = json.loads(r.stdout)["findings"]
    assert "GL204" not in {f["code"] for f in found}
    assert {f["level"] for f in found if f["code"] == "GL106"} == {"error"}
    assert r.returncode == 3


def test_policy_lint_table_applies_to_that_file(tmp_path: Path) -> None:
    p = tmp_path / "p.toml"
    lint_table = 'version = 1\n[lint]\nignore = ["GL106"]\n'
    p.write_text(WARNINGS_ONLY.replace("version = 1\n", lint_table))
    assert guard("lint", "--fail-level", "note", str(p)).returncode == 0


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ('[tool.guard.lint]\nignore = ["GL999"]\n', "unknown rule code 'GL999'"),
        ('[tool.guard.lint.levels]\nGL101 = "fatal"\n', "expected one of error"),
        ('[tool.guard.lint]\nselect = ["GL101"]\n', "unknown key 'select'"),
    ],
)
def test_bad_pyproject_config_is_exit_2(
    files: dict[str, Path], tmp_path: Path, table: str, needle: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(table)
    r = guard("lint", "clean.toml", cwd=tmp_path)
    assert r.returncode == 2 and needle in r.stderr and "pyproject.toml" in r.stderr


def test_default_target_is_the_discovered_policy(repo: Path) -> None:
    (repo / ".openoxide" / "policy.toml").write_text(ERRORS)
    r = guard("lint", cwd=repo)
    assert r.returncode == 3 and "policy.toml:6: GL204" in r.stdout


def test_default_target_without_policy_is_the_builtin(repo: Path) -> None:
    r = guard("lint", cwd=repo)
    assert r.returncode == 0 and "No findings in 1 file" in r.stdout


def test_list_rules_and_explain() -> None:
    r = guard("lint", "--list-rules")
    assert r.returncode == 0 and all(code in r.stdout for code in RULES)
    r = guard("lint", "--explain", "gl204")
    assert r.returncode == 0 and "## How to fix" in r.stdout


def test_help_teaches_with_examples() -> None:
    r = guard("lint", "--help")
    assert r.returncode == 0 and "--format sarif" in r.stdout and "Exit status" in r.stdout


def test_pre_commit_hook_definition() -> None:
    text = (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert "- id: guard-lint" in text and "entry: guard lint" in text
    assert "language: python" in text


def test_json_policy_files_are_linted_with_lines(tmp_path: Path) -> None:
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"version": 1, "agents": {"plan": {
        "mode": "plan", "default": "deny",
        "write": {"allow": ["{plans}/*.md", "docs/**"], "default": "deny"}}}}, indent=2))
    r = guard("lint", "--format", "json", str(p))
    (f,) = json.loads(r.stdout)["findings"]
    assert r.returncode == 3 and f["code"] == "GL201" and f["line"] == 10


def test_ci_command_on_shipped_policies() -> None:
    """What .ci/run runs: `guard lint policies/` exits 0."""
    r = guard("lint", "policies/", cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "No findings in" in r.stdout
