"""Option tables and their getopt_long parsing (guard/analysis/shell/option_parser.py, tables/)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from guard.analysis.shell import analyse
from guard.analysis.shell.option_parser import Spec
from guard.analysis.shell.tables import file_options as files
from guard.analysis.shell.tables import wrapper_options as wrappers
from guard.analysis.shell.words import Arg

SORTISH = Spec("bnr", "-o|--output=@write --outline -k|--key= --compress-program=@exec"
               " --color=? --jq=2 -i=?")


def parse(spec: Spec, line: str):  # type: ignore[no-untyped-def]
    return spec.parse([Arg(w) for w in line.split()])


def names(spec: Spec, line: str) -> list[tuple[str, list[str | None]]]:
    p = parse(spec, line)
    assert p.error is None, p.error
    return [(o.name, [v.text for v in vs]) for o, _, vs in p.opts]


def test_long_options_abbreviate_to_a_unique_prefix() -> None:
    assert names(SORTISH, "--outp=f") == [("--output", ["f"])]
    assert names(SORTISH, "--outl") == [("--outline", [])]
    assert names(SORTISH, "--comp sh") == [("--compress-program", ["sh"])]


def test_an_ambiguous_prefix_is_an_error_and_an_exact_name_wins() -> None:
    assert "ambiguous" in (parse(SORTISH, "--out f").error or "")
    exact = Spec("", "--out= --output=")
    assert names(exact, "--out f") == [("--out", ["f"])]


def test_unknown_options_and_bad_values_are_errors() -> None:
    assert "unknown option --nope" in (parse(SORTISH, "--nope").error or "")
    assert "unknown option -z" in (parse(SORTISH, "-bz").error or "")
    assert "takes no value" in (parse(SORTISH, "--outline=3").error or "")
    assert "needs a value" in (parse(SORTISH, "-k").error or "")
    assert "needs a value" in (parse(SORTISH, "--jq a").error or "")


def test_short_bundles_attached_values_and_optional_values() -> None:
    assert names(SORTISH, "-nrk2") == [("-n", []), ("-r", []), ("--key", ["2"])]
    assert names(SORTISH, "-no out") == [("-n", []), ("--output", ["out"])]
    assert names(SORTISH, "-iOtouch") == [("-i", ["Otouch"])]  # optional: attached only
    assert names(SORTISH, "-i x") == [("-i", [])] and parse(SORTISH, "-i x").pos[0].text == "x"
    assert names(SORTISH, "--color x") == [("--color", [])]
    assert names(SORTISH, "--color=auto") == [("--color", ["auto"])]
    assert names(SORTISH, "--jq a b") == [("--jq", ["a", "b"])]


def test_permutation_double_dash_and_stdin() -> None:
    p = parse(SORTISH, "a -o out b -- -n -")
    assert [v.text for v in p.pos] == ["a", "b", "-n", "-"]
    assert p.has("--output")
    q = Spec("n", permute=False).parse([Arg(w) for w in ["-n", "cmd", "-x"]])
    assert [v.text for v in q.pos] == ["cmd", "-x"] and q.error is None


def test_a_computed_word_may_be_an_option() -> None:
    p = SORTISH.parse([Arg(None), Arg("f")])
    assert p.dynamic and SORTISH.dangerous
    assert "computed argument" in str([e.detail for e in analyse('sort "$X" f')])


def test_exact_mode_understands_only_separate_words() -> None:
    tree = files.TREE
    assert names(tree, "-L 2 -a") == [("-L", ["2"]), ("-a", [])]
    assert parse(tree, "-L2").error is not None
    assert parse(tree, "-aL 2").error is not None


def test_tables_are_consistent() -> None:
    """Every spec builds (no option listed twice, roles known) and each reader's operand
    kind is one the handler knows."""
    kinds = {"read", "none", "look", "shuf", "uniq", "file", "date", "sets"}
    for name, (spec, kind) in files.READERS.items():
        assert kind in kinds, name
        assert spec.options(), name


def _documented_long_options(exe: str) -> set[str]:
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, check=False,
                         env={"LANG": "C", "PATH": "/usr/bin:/bin"}).stdout
    return set(re.findall(r"(?<![\w-])--([a-z0-9][a-z0-9-]*)", out))


def test_abbreviating_tables_list_every_long_option_the_installed_program_documents() -> None:
    """Abbreviations resolve soundly only against the complete set: a missing --output
    would let --outp resolve to some other, harmless, option. Checked against the
    installed GNU programs' --help."""
    specs = {n: s for n, (s, _) in files.READERS.items()}
    specs |= dict(files.WRITERS) | {"grep": files.GREP, "sed": files.SED, "xargs": wrappers.XARGS,
                                    "chmod": files.CHMOD, "chown": files.CHOWN}
    specs |= {n: s for n, (s, _) in wrappers.WRAPPERS.items()
              if n in ("env", "nice", "nohup", "timeout", "stdbuf", "setsid", "ionice")}
    checked = []
    for name, spec in sorted(specs.items()):
        exe = shutil.which(name)
        if exe is None or not spec.abbrev:
            continue
        missing = _documented_long_options(exe) - set(spec.long)
        assert not missing, f"{name}: table lacks {sorted(missing)}"
        checked.append(name)
    # the GNU core programs are on every machine this runs on
    assert {"cat", "sort", "shuf", "sdiff", "sed", "cp", "env", "xargs", "date"} <= set(checked)
    time_help = _documented_long_options("/usr/bin/time") if shutil.which("time") else set()
    assert time_help - set(wrappers.WRAPPERS["time"][0].long) == set()


@pytest.mark.parametrize("line,kind,target", [
    ("sort --outp=src/a x", "write", "src/a"),
    ("sort -nrosrc/a x", "write", "src/a"),
    ("sort x -o src/a", "write", "src/a"),
    ("shuf -o src/a x", "write", "src/a"),
    ("sdiff -o src/a x y", "write", "src/a"),
    ("/usr/bin/time -o src/a ls", "write", "src/a"),
    ("sed --in=.b s/a/b/ f", "write", "f"),
    ("cp --li src/app.py .openoxide/plans/x.md", "write", "src/app.py"),
    ("env --chdir=src touch x", "write", "src/x"),
    ("echo x | xargs -e touch y", "write", "y"),
    ("find . -fprint y", "write", "y"),
])
def test_writer_options_in_every_syntax(line: str, kind: str, target: str) -> None:
    assert (kind, target) in {(e.kind.value, e.target) for e in analyse(line)}


@pytest.mark.parametrize("line", [
    "sort --compress-prog=sh x", "sort --s x", "date -us 2020-01-01", "date 0101",
    "hostname -F f", "hostname x", "git grep -iOtouch x", "git remote -v add x y",
    "git fsck --lost-found", "git log --outp=x", "jobs -x touch y", "cat --nope f",
    "file -p f", "file --preserve f",
    "file --comp -m m", "curl --outp x https://h/", "wget --output-doc=x https://h/",
])
def test_not_read_only(line: str) -> None:
    kinds = {e.kind.value for e in analyse(line)}
    assert kinds & {"write", "exec", "delete"}, line


@pytest.mark.parametrize("line", [
    "ls -la src", "sort -nrk2 f", "cat --show-a f", "grep -rn --include=*.py x src",
    "git log --oneline -5", "git --no-optional-locks status --short", "head -n 20 f", "tail -20 f",
    "du -sh .", "jq --rawfile a f . g", "date +%s", "env -i ls", "timeout 5 cat f",
    "tree -L 2 src", "xxd -c 8 f", "git branch -a", "git config --get user.name",
])
def test_read_only(line: str) -> None:
    bad = [e for e in analyse(line) if e.kind.value != "read"]
    assert not bad, (line, bad)
