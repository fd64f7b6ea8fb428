"""Guard's shell grammar: every sentence it accepts, bash and dash read as guard does.

The proof is a comparison of parse trees, not of effects: each accepted command runs
under real bash and real dash with every program replaced by an argv recorder
(tests/tools/grammar_harness.py), once with every program succeeding and once with
every program failing; what each shell ran (the argv of every program, where its
stdin, stdout and stderr pointed, which pipelines ran) must equal what guard's tree of
the command predicts. Commands come from a seeded generator of the grammar and from
two fuzzers over shell-significant characters (one seeded, one hypothesis).
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard.analysis.shell.grammar import NotInGrammar, parse, render
from tests.tools.grammar_harness import (
    PROGRAMS,
    build_recorder,
    group_like,
    guard_reading,
    scratch_dir,
    shell_reading,
)

SHELLS = ("bash", "dash")


@pytest.fixture(scope="module")
def recorder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    for shell in SHELLS:
        assert shutil.which(shell), f"{shell} is needed: apt-get install {shell}"
    where = tmp_path_factory.mktemp("grammar")
    return build_recorder(where), scratch_dir(where)


def assert_read_alike(command: str, recorder: tuple[Path, Path]) -> bool:
    """Compare the readings; False (nothing compared) when a program is not a recorder."""
    bin_dir, cwd = recorder
    sentence = parse(command)
    assert parse(render(sentence)) == sentence, command  # the canonical spelling is the same
    if any(s.argv[0] not in PROGRAMS for s in sentence.simples()):
        return False
    for status in (0, 1):
        predicted = guard_reading(sentence, cwd, status)
        for shell in SHELLS:
            got = group_like(shell_reading(shell, command, bin_dir, cwd, status), predicted)
            assert got == predicted, (shell, status, command)
    return True


# ------------------------------------------------------------------ the generator

SAFE_BARE = "abcxyzABZ019_@%+=:,./-"
SQ = [chr(c) for c in range(0x20, 0x7F) if chr(c) not in "'\\"]
DQ = [chr(c) for c in range(0x20, 0x7F) if chr(c) not in "\"$`\\!"]


def _piece(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.5:
        return "".join(rng.choice(SAFE_BARE) for _ in range(rng.randint(1, 6)))
    if kind < 0.75:
        return "'" + "".join(rng.choice(SQ) for _ in range(rng.randint(0, 8))) + "'"
    return '"' + "".join(rng.choice(DQ) for _ in range(rng.randint(0, 8))) + '"'


def _word(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.1:
        return rng.choice(["src/*.py", "./*.py", "a?py", "src/?.txt",
                           "--include=*.py", "b*", "src/*", "no*match"])
    if r < 0.2:
        return rng.choice(["-n", "-rn", "--oneline", "-5", "--", "-", "--color=never"])
    return "".join(_piece(rng) for _ in range(rng.randint(1, 3)))


def _simple(rng: random.Random) -> str:
    words = [rng.choice(PROGRAMS)] + [_word(rng) for _ in range(rng.randint(0, 4))]
    for _ in range(rng.randint(0, 2) if rng.random() < 0.3 else 0):
        words.append(rng.choice([">/dev/null", "2>/dev/null", ">> /dev/null", "2>&1", ">&2",
                                 "</dev/null", "1>/dev/null", "0< /dev/null", "1>&2"]))
    blank = rng.choice([" ", "  ", "\t", " \t"])
    return blank.join(words)


def generate(rng: random.Random) -> str:
    parts = []
    for k in range(rng.randint(1, 4)):
        if k:
            parts.append(rng.choice(["&&", "||", ";", " && ", " || ", "; ", " ;  "]))
        parts.append(" | ".join(_simple(rng) for _ in range(rng.randint(1, 3))))
    return rng.choice(["", " "]) + "".join(
        p if p.strip() in ("&&", "||", ";") else f" {p} " for p in parts
    ).strip(" ") + rng.choice(["", " ", "\t"])


def test_generated_sentences_are_read_alike_by_bash_dash_and_guard(
    recorder: tuple[Path, Path],
) -> None:
    rng = random.Random(40)
    accepted = 0
    for _ in range(160):
        command = generate(rng)
        try:
            parse(command)
        except NotInGrammar:
            continue  # e.g. a generated word that starts with a glob
        accepted += assert_read_alike(command, recorder)
    assert accepted >= 120  # the generator speaks the grammar


# ------------------------------------------------------------------ the fuzzers

ALPHABET = [*" \t\n\\'\"$`(){}[]|&;<>*?~#!=-/.:,%@+^ab12", "\u00a0", "\u2028", "é"]


def _fuzz_case(rng: random.Random) -> str:
    body = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 14)))
    return f"{rng.choice(PROGRAMS)} {body}" if rng.random() < 0.8 else body


def test_fuzzed_text_the_grammar_accepts_is_read_alike(recorder: tuple[Path, Path]) -> None:
    rng = random.Random(7)
    accepted = 0
    for _ in range(4000):
        command = _fuzz_case(rng)
        try:
            parse(command)
        except NotInGrammar:
            continue
        accepted += assert_read_alike(command, recorder)
    assert accepted >= 40, accepted  # the fuzzer reaches accepted sentences


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(alphabet=st.sampled_from(ALPHABET), max_size=16),
       st.sampled_from(PROGRAMS))
def test_hypothesis_text_the_grammar_accepts_is_read_alike(
    recorder: tuple[Path, Path], body: str, program: str
) -> None:
    command = f"{program} {body}"
    try:
        parse(command)
    except NotInGrammar:
        return
    assert_read_alike(command, recorder)


# ------------------------------------------------------------------ what stays outside

OUTSIDE = {
    "backslash-newline comment": "ls \\\n#; touch src/x",
    "backslash-newline word split": "sort -\\\no src/app.py data.txt",
    "backslash-newline in an option": "git log --\\\noutput=src/app.py",
    "array assignment before a program": "x=(a)true rm -f README.md",
    "nested backticks": "echo `echo \\`touch src/x\\``",
    "regex match": "[[ a =~ $(touch src/x) ]]",
    "dollar expansion": "cat $HOME/x",
    "assignment prefix": "LD_PRELOAD=.openoxide/plans/x.so nice ls",
    "export with a glob": "export a=*.py",
    "redirection to a file": "echo hi > src/app.py",
    "here-document": "cat <<EOF",
    "background job": "ls & touch src/x",
    "subshell": "(ls)",
    "brace group": "{ ls; }",
    "glob at a word start": "ls *.py",
    "glob in a short option": "sort -o*",
    "dot glob": "ls src/.*",
    "tilde": "ls ~/x",
    "non-ASCII space": "ls\u00a0-la",
    "time keyword": "time ls",
    "fd over 2": "ls 3>/dev/null",
    "bash-only |&": "ls |& cat",
    "bash-only &>": "ls &>/dev/null",
    "negation": "! ls",
    "test brackets": "[ -f x ]",
}


@pytest.mark.parametrize("attack", sorted(OUTSIDE))
def test_constructs_bash_reads_its_own_way_are_outside_the_grammar(attack: str) -> None:
    with pytest.raises(NotInGrammar):
        parse(OUTSIDE[attack])


def test_literal_quotes_hold_any_character_but_the_quote() -> None:
    script = "echo 'x' \\\n $(touch src/x) \u00e9"
    quoted = "'" + script.replace("'", "'\"'\"'") + "'"
    sentence = parse(f"/usr/bin/guard confine -- bash -c {quoted}", literal_quotes=True)
    assert sentence.simples()[0].argv[-1] == script
    with pytest.raises(NotInGrammar):
        parse(f"/usr/bin/guard confine -- bash -c {quoted}")


def test_the_comparison_sees_a_reading_that_differs(recorder: tuple[Path, Path]) -> None:
    """The harness can fail: guard's tree of one command against the shells' run of another."""
    bin_dir, cwd = recorder
    predicted = guard_reading(parse("ls a b"), cwd, 0)
    for shell in SHELLS:
        got = group_like(shell_reading(shell, "ls 'a b'", bin_dir, cwd, 0), predicted)
        assert got != predicted
        same = group_like(shell_reading(shell, "ls a b", bin_dir, cwd, 0), predicted)
        assert same == predicted


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(alphabet=st.characters(blacklist_characters="\0",
                                      blacklist_categories=["Cs"]), max_size=40))
def test_the_confined_form_hands_bash_the_very_command(command: str) -> None:
    """The refusal's confined form round-trips: guard reads it as the confined form, and
    bash (as Codex runs it) passes the exact command text on as the script."""
    import subprocess

    from guard.sandbox.direct import confined_form, is_confined_form

    program = ["/usr/bin/printf"]  # stands in for guard: prints the argv it gets
    form = confined_form(command, program)
    assert is_confined_form(form, program)
    out = subprocess.run(["bash", "-c", form.replace(" confine ", " '%s\\0' confine ", 1)],
                         capture_output=True, timeout=30, check=True).stdout
    assert out.split(b"\0")[:-1] == [b"confine", b"--", b"bash", b"-c",
                                     command.encode("utf-8", "surrogateescape")]
