"""Unit tests of the shell analyser: which effects a command line yields."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from guard.analysis.shell import analyse, analyse_argv, parse_patch
from guard.effects import Effect, EffectKind


def kinds(command: str, cwd: str | None = None) -> set[tuple[str, str | None]]:
    return {(e.kind.value, e.target) for e in analyse(command, cwd)}


def test_read_only_allowlist_yields_only_reads() -> None:
    assert kinds("cat a.txt | grep -n foo | head -3") == {("read", "a.txt")}
    assert kinds("ls -la src") == {("read", "src")}
    assert kinds("git log --oneline -5") == {("read", ".")}


def test_redirection_targets_are_writes_except_dev_null() -> None:
    """Attack: write a file through >, >>, &>, 2>, >|."""
    for op in (">", ">>", "&>", "&>>", "2>", ">|", ">&"):
        assert ("write", "out") in kinds(f"ls {op} out"), op
    assert kinds("ls > /dev/null 2>&1 2>/dev/stderr") == set()


def test_input_redirection_is_a_read() -> None:
    assert kinds("wc -l < a.txt") == {("read", "a.txt")}


def test_variable_glob_and_substitution_targets_are_unknown() -> None:
    """Attack: hide the target of a write behind $VAR, a glob or $(...)."""
    for cmd in (
        "echo x > $F",
        "echo x > *.py",
        "echo x > $(pick)",
        "echo x > a{1,2}",
        "rm src/*.py",
        'tee "$OUT"',
    ):
        targets = [e for e in analyse(cmd) if e.kind in (EffectKind.WRITE, EffectKind.DELETE)]
        assert targets and all(e.target is None for e in targets if "pick" not in cmd), cmd
        assert any(e.target is None for e in targets), cmd


def test_quotes_and_escapes_resolve_to_the_literal_path() -> None:
    assert ("write", "a b.txt") in kinds("echo x > 'a b.txt'")
    assert ("write", "a b.txt") in kinds('echo x > "a b.txt"')
    assert ("write", "a b.txt") in kinds("echo x > a\\ b.txt")
    assert ("delete", "x") in kinds("'r'm x")


def test_sed_in_place_forms() -> None:
    """Attack: sed -i, -i.bak, -ni, --in-place=SUFFIX."""
    for cmd in (
        "sed -i s/a/b/ f",
        "sed -i.bak s/a/b/ f",
        "sed -ni p f",
        "sed --in-place=.o -e s/a/b/ f",
        "sed -E -i 's/a/b/' f",
    ):
        assert ("write", "f") in kinds(cmd), cmd
    assert kinds("sed -n 1,5p f") == {("read", "f")}


def test_sed_scripts_that_write_or_execute_are_unknown_writes() -> None:
    """Attack: sed's w command, s///w flag and e command."""
    for script in ("w out", "s/a/b/w out", "1e touch x", "s/a/b/e"):
        assert ("write", None) in kinds(f"sed '{script}' f"), script


def test_command_and_process_substitutions_are_analysed() -> None:
    """Attack: $(...), backticks, <(...), >(...)."""
    assert ("delete", "x") in kinds("echo $(rm x)")
    assert ("write", "y") in kinds("echo `touch y`")
    assert ("delete", "z") in kinds("diff <(rm z) a")
    assert ("write", "w") in kinds("ls > >(tee w)")
    assert ("delete", "q") in kinds('echo "$(echo "$(rm q)")"')


def test_heredoc_bodies() -> None:
    """Attack: command substitution and backticks in an unquoted heredoc body."""
    assert ("delete", "a") in kinds("cat <<EOF\n$(rm a)\nEOF")
    assert ("delete", "b") in kinds("cat <<EOF\n`rm b`\nEOF")
    assert kinds("cat <<'EOF'\n$(rm a) `rm b`\nEOF") == set()
    assert ("write", "c") in kinds("bash <<'EOF'\ntouch c\nEOF")


def test_nested_shells_eval_and_env_split_are_analysed() -> None:
    """Attack: bash -c, sh -c, bash -lc, eval, env -S."""
    assert ("write", "a") in kinds("bash -c 'touch a'")
    assert ("write", "b") in kinds('sh -c "echo > b"')
    assert ("write", "c") in kinds("bash -lc 'touch c'")
    assert ("delete", "d") in kinds("eval rm d")
    assert ("delete", "e") in kinds("env -S 'rm e'")
    assert ("write", None) in kinds('bash -c "$X"')
    assert ("write", None) in kinds('eval "$X"')


def test_nesting_depth_is_bounded() -> None:
    effects = analyse("eval " * 12 + "touch x")
    assert any(e.kind is EffectKind.WRITE and e.target is None for e in effects)


def test_wrappers_are_unwrapped() -> None:
    """Attack: hide rm behind sudo, env, nice, nohup, timeout, time, command, stdbuf, xargs."""
    for cmd in (
        "sudo rm x",
        "sudo -u root rm x",
        "env A=1 rm x",
        "env -i rm x",
        "nice -n 5 rm x",
        "nohup rm x",
        "timeout 5 rm x",
        "timeout -s KILL 5 rm x",
        "time rm x",
        "command rm x",
        "builtin rm x",
        "stdbuf -oL rm x",
        "exec rm x",
    ):
        assert ("delete", "x") in kinds(cmd), cmd
    assert ("delete", None) in kinds("ls | xargs rm")
    assert ("delete", None) in kinds("ls | xargs -I{} rm {}")


def test_inline_interpreters_are_unknown_exec() -> None:
    for cmd in ("python3 -c 'print(1)'", "node -e 1", "perl -e 1", "ruby -e 1"):
        effects = analyse(cmd)
        assert Effect.exec(None, effects[-1].detail) in effects or any(
            e.kind is EffectKind.EXEC and e.target is None for e in effects
        ), cmd


def test_path_qualified_program_is_not_the_allowlisted_one() -> None:
    """Attack: ./cat or /tmp/x/ls planted to look like a read-only program."""
    for cmd in ("./cat a", "/tmp/x/ls", "bin/grep x"):
        effects = analyse(cmd)
        assert any(e.kind is EffectKind.EXEC and e.target is None for e in effects), cmd
        assert not any(e.kind is EffectKind.READ for e in effects), cmd


def test_unknown_program_yields_unknown_exec() -> None:
    effects = analyse("frobnicate --all")
    assert [e.kind for e in effects] == [EffectKind.EXEC]
    assert effects[0].target is None


def test_find_actions() -> None:
    """Attack: find -delete, -exec, -execdir, -ok, -fprint."""
    assert ("delete", ".") in kinds("find . -delete")
    assert ("delete", None) in kinds("find . -exec rm {} +")
    assert ("write", "l") in kinds("find . -fprint l")
    assert ("write", None) in kinds("find . $X")
    assert kinds("find src -name '*.py'") == {("read", "src")}


def test_git_read_and_write_subcommands() -> None:
    """Attack: git -c config, mutating subcommands, --output."""
    assert ("write", None) in kinds("git -c core.hooksPath=/x status")
    assert ("write", ".git") in kinds("git commit -m x")
    assert ("write", ".") in kinds("git checkout -- a")
    assert ("write", ".git/config") in kinds("git config core.x y")
    assert ("write", "~/.gitconfig") in kinds("git config --global a.b c")
    assert kinds("git config --get a.b") == {("read", ".")}
    assert ("write", "sub/.git") in kinds("git -C sub commit")
    assert ("write", "o") in kinds("git diff --output=o")
    assert ("write", ".git") in kinds("git branch newname")
    assert kinds("git branch -a") == {("read", ".")}


def test_hard_link_writes_both_names_symlink_only_the_link() -> None:
    """Attack: a hard link makes the source writable through a plan-directory name."""
    assert kinds("ln src.py plans/x.md") >= {("write", "plans/x.md"), ("write", "src.py")}
    assert ("write", "src.py") not in kinds("ln -s src.py plans/x.md")
    assert ("write", "a") in kinds("cp -l a b")


def test_copy_into_an_existing_directory_writes_the_inner_name(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    assert kinds("cp a.md d", str(tmp_path)) == {("write", "d/a.md"), ("read", "a.md")}
    assert kinds("cp a.md new.md", str(tmp_path)) == {("write", "new.md"), ("read", "a.md")}
    assert kinds("mv a b", str(tmp_path)) == {("write", "b"), ("delete", "a")}
    # without a cwd, both readings are kept
    assert kinds("cp a.md d") == {("write", "d"), ("write", "d/a.md"), ("read", "a.md")}


def test_cd_adds_possible_directories() -> None:
    """Attack: a cd that may or may not happen moves relative writes elsewhere."""
    assert kinds("cd sub && rm x") >= {("delete", "x"), ("delete", "sub/x")}
    assert kinds("(cd plans); rm x") >= {("delete", "x")}
    assert ("delete", None) in kinds("cd $D && rm x")
    assert ("delete", "/abs/x") in kinds("cd sub; rm /abs/x")


def test_environment_changes_make_allowlisted_programs_unknown() -> None:
    """Attack: PATH=., LD_PRELOAD, aliases, function shadowing."""
    for cmd in (
        "PATH=.:$PATH cat a",
        "export PATH=/tmp; ls",
        "LD_PRELOAD=x.so ls",
        "alias ls=rm; ls",
    ):
        assert any(e.kind is EffectKind.EXEC and e.target is None for e in analyse(cmd)), cmd
    assert kinds("LANG=C ls") == set()
    assert ("delete", "s") in kinds("ls() { rm s; }; ls")


def test_arithmetic_on_variables_is_unknown() -> None:
    """Attack: x='a[$(cmd)]'; $((x)) runs cmd."""
    for cmd in (
        "echo $((x))",
        "((x++))",
        "[[ $n -eq 1 ]]",
        "let x=1",
        "echo ${!n}",
        "declare -i z=y",
    ):
        assert any(e.kind is EffectKind.EXEC and e.target is None for e in analyse(cmd)), cmd
    assert kinds("echo $((1 + 2))") == set()


def test_parse_errors_are_unknown_writes() -> None:
    for cmd in ("echo 'x", "echo $(", "ls |", "if then fi", "ls\x00rm"):
        effects = analyse(cmd)
        assert any(
            e.kind is EffectKind.WRITE and e.target is None and "unparseable" in e.detail
            for e in effects
        ), cmd


def test_download_tools() -> None:
    assert kinds("curl -o out https://e.com/x") == {("network", "e.com"), ("write", "out")}
    assert ("write", None) in kinds("curl -O https://e.com/x")
    assert ("write", None) in kinds("wget https://e.com/x")
    assert ("network", "e.com") in kinds("wget -O - https://e.com/x")


def test_package_managers_and_builders_are_unknown_writes() -> None:
    for cmd in ("pip install x", "npm install", "make", "cargo build", "apt-get install x"):
        assert ("write", None) in kinds(cmd), cmd


def test_apply_patch_headers() -> None:
    body = (
        "*** Begin Patch\n*** Add File: a\n+x\n*** Update File: b\n*** Move to: c\n@@\n-x\n+y\n"
        "*** Delete File: d\n*** End Patch\n"
    )
    got = {(e.kind.value, e.target) for e in parse_patch(body)}
    assert got == {("write", "a"), ("write", "b"), ("write", "c"), ("delete", "b"), ("delete", "d")}
    assert [(e.kind, e.target) for e in parse_patch("no headers")] == [(EffectKind.WRITE, None)]


def test_argv_form_is_not_reparsed_as_shell() -> None:
    assert {(e.kind.value, e.target) for e in analyse_argv(["echo", "x > y"])} == set()
    assert ("write", "z") in {
        (e.kind.value, e.target) for e in analyse_argv(["bash", "-lc", "touch z"])
    }


@pytest.mark.parametrize("n", [10_000, 200_000])
def test_very_long_commands_are_analysed_to_the_end(n: int) -> None:
    """Attack: bury a write after a huge amount of harmless text."""
    assert ("write", "end") in kinds(": " + "a" * n + "; touch end")


def test_deep_nesting_never_raises() -> None:
    assert any(e.target is None for e in analyse("(" * 5000 + "ls" + ")" * 5000))
    assert analyse("$(" * 3000 + "ls" + ")" * 3000) is not None


def test_system_program_paths_are_the_program_but_others_are_not() -> None:
    """Attack: /tmp/bin/cat posing as cat; /usr/bin/../../tmp/cat escaping the system dir."""
    assert kinds("/bin/rm x") == {("delete", "x")}
    assert kinds("/usr/bin/cat a") == {("read", "a")}
    for cmd in ("/tmp/bin/cat a", "/usr/bin/../../tmp/cat a", "/usr/bin/frob"):
        assert ("exec", None) in kinds(cmd), cmd
        assert ("read", "a") not in kinds(cmd), cmd


def test_builtins_that_assign_or_do_nothing() -> None:
    """Attack: read into a subscripted name (evaluated), coproc hiding a command."""
    assert kinds("while read -r l; do echo $l; done < f") == {("read", "f")}
    assert ("exec", None) in kinds("read 'a[$(id)]'")
    assert ("exec", None) in kinds("mapfile -C cb arr < f")
    assert kinds("coproc rm x") == {("delete", "x")}
    assert kinds("yes | head -3") == set()


# Inputs that crashed the tree-sitter-bash 0.25 parser process (found by fuzzing): a
# code point beyond the BMP after "${". A crash would kill a hook: fail open.
PARSER_CRASHERS = [
    "x${\U000e0000",
    "x ${\U000e56d3",
    "\ua0e0${\U000e56d3",
    "\u517el\ue3ea\n\x19 ${\U00034a7c\uc2c2\\\ueba4z`\U0002e3fa<<${",
    "\U00027f94 ${\x19x${\U00037d5a`EOF`${",
]


def test_parser_crashers_are_analysed_without_crashing_the_process() -> None:
    """Attack: a command crafted to segfault the shell parser, killing the hook.

    Whether the old parser crashed depended on memory layout; the next test pins the
    mechanism deterministically."""
    code = (
        "import json, sys\n"
        "from guard.analysis.shell import analyse\n"
        "for c in json.loads(sys.stdin.read()):\n"
        "    analyse(c, None)\n"
        "print('survived')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(PARSER_CRASHERS),
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0 and "survived" in r.stdout, (r.returncode, r.stderr[-2000:])


def test_names_beyond_the_bmp_keep_their_text() -> None:
    effects = analyse("echo hi > notes\U0001f600.md && cat \U0001f4c4.txt", None)
    assert [str(e) for e in effects] == ["write notes\U0001f600.md", "read \U0001f4c4.txt"]


def test_parser_is_never_given_code_points_beyond_the_bmp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The crash above depends on memory layout, so also pin the mechanism: whatever
    the command, the bytes handed to tree-sitter hold no 4-byte UTF-8 sequence."""
    import guard.analysis.shell.walker as walker

    seen: list[bytes] = []
    real = walker.PARSER

    class Recorder:
        def parse(self, source: bytes) -> object:
            seen.append(source)
            return real.parse(source)

    monkeypatch.setattr(walker, "PARSER", Recorder())
    for command in [*PARSER_CRASHERS, "bash -c 'echo \U0001f600 > x'", "cat \U0010ffff"]:
        analyse(command, None)
    assert seen and not any(b >= 0xF0 for source in seen for b in source)


@pytest.mark.parametrize("command", [
    "[[ -v 'a[$(id)]' ]]", "[[ 'a[$(id)]' -eq 1 ]]", "[[ x -gt 1 ]]", "test -v 'a[$(id)]'",
    "[ -v \"$n\" ]", "unset 'a[$(id)]'", "declare 'a[$(id)]=1'", "local -a 'x=($(id))'",
    "export 'a[$(id)]'", "wait -p 'a[$(id)]'", "printf -v 'a[$(id)]' x", "read -a 'a[$(id)]'",
    "mapfile 'a[$(id)]'", "getopts a 'a[$(id)]'", "echo ${x@P}", "echo ${y:x}",
    "echo ${y:0:n}", "echo $((x))", "(( x ))", "let x=y", "echo ${!x}", "echo ${a[i]}",
])
def test_constructs_that_evaluate_code_are_unknown_exec(command: str) -> None:
    """Attack: code hidden where bash evaluates arithmetic or a variable name."""
    assert ("exec", None) in kinds(command), command


@pytest.mark.parametrize("command", [
    "[[ -v name ]]", "[[ 1 -eq 1 ]]", "test -v x", "unset x y", "declare -a a=(1 2)",
    "printf -v out %s x", "read -r line", "echo ${x:1:2}", "echo ${x:-d}", "echo $((1 + 2))",
    "echo ${a[0]}", "wait -p pid", "[[ -n $x && $y == 1 ]]",
])
def test_literal_operands_evaluate_nothing(command: str) -> None:
    assert ("exec", None) not in kinds(command), command


def test_a_literal_subscript_is_analysed_as_the_code_it_runs() -> None:
    """Attack: unset 'a[$(rm -rf src)]' runs rm: the delete is named, not only 'unknown'."""
    assert ("delete", "src") in kinds("unset 'a[$(rm -rf src)]'")


def test_descriptor_writes_reach_files_opened_for_reading() -> None:
    """Attack: /dev/fd/3 (or /dev/stdout) reopens by path the file a redirection opened."""
    assert ("write", "src/app.py") in kinds("{ echo x > /dev/fd/3; } 3< src/app.py")
    assert ("write", "src/app.py") in kinds("{ echo x > /dev/stdout; } 1< src/app.py")
    assert ("write", "src/app.py") in kinds("cat < src/app.py > /dev/stdin")
    assert kinds("echo x > /dev/fd/1 2>/dev/stderr") == set()
    assert ("write", "/dev/fd/../cwd/a") in kinds("echo x > /dev/fd/../cwd/a")
