"""Differential test of the shell analyser against real execution.

A seeded generator builds bash command lines from a grammar: programs from guard's
option tables, with options drawn from the same tables (short bundles, attached
values, long names abbreviated to random prefixes, ``--name=value``), unknown
options, bash constructs that evaluate code, and redirections (``/dev/fd``,
``/dev/stdout``, ``/proc/self``...). Every command the shipped ``plan`` agent
allows is then run for real with bash in a scratch repository with its own HOME
and TMPDIR, and must change nothing outside the plan directory: the whole scratch
tree (the worktree, its ``.git``, HOME, TMPDIR) is snapshotted before and after
(type, mode, owner, size, mtime, content, link target).

Paths in the generated commands are relative to the scratch worktree (or name
``/dev/...``, ``/proc/self/...``), so whatever a command does stays in the scratch
tree. Run standalone for a longer campaign:

    python tests/tools/differential.py --cases 20000 --seed 7
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from guard.analysis import effects_for
from guard.analysis.shell.option_parser import Option, Spec
from guard.analysis.shell.tables import file_options as file_tables
from guard.analysis.shell.tables import git_options as git_tables
from guard.decide import Guard

PLANS = ".openoxide/plans"
FILES = ["src/app.py", "src/util.py", "README.md", "data.txt", "nums.txt", "doc/guide.md",
         ".env"]
NEW = ["out.txt", "src/new.py", "src/app.py", "pwned", "doc/x", f"{PLANS}/p.md",
       f"{PLANS}/new.md", "README.md"]
VALUES = ["1", "2", "3", "0", "-", "%s", ":", ",", "x", "abc", "1,2", "utf-8", "always",
          "auto", "none", "touch", "sh", "cat", "HEAD", "main"]
SIMPLE = ["cat src/app.py", "ls", "ls -la src", "wc -l data.txt", "head -3 nums.txt",
          "git status", "git --no-optional-locks status -s", "git log --oneline -2",
          "git diff", "git -c diff.autoRefreshIndex=false diff", "grep -n print src/app.py",
          "echo hi", "sort nums.txt", "true"]


@dataclass
class Spec_:
    name: str
    spec: Spec
    operands: list[str] = field(default_factory=list)


def _programs() -> list[Spec_]:
    # programs that wait for input or time are left out: they only slow the run down
    out = [Spec_(n, s) for n, (s, _) in file_tables.READERS.items() if n not in ("sleep", "yes")]
    out += [Spec_("grep", file_tables.GREP, ["print"]), Spec_("sed", file_tables.SED, ["p"]),
            Spec_("jq", file_tables.JQ, ["."]), Spec_("tree", file_tables.TREE),
            Spec_("xxd", file_tables.XXD)]
    out += [Spec_(f"git {sub}", s) for sub, s in git_tables.READ.items()]
    out += [Spec_("git branch", git_tables.BRANCH), Spec_("git tag", git_tables.TAG)]
    out += [Spec_(n, s) for n, s in file_tables.WRITERS.items()]
    return out


def _file(rnd: random.Random) -> str:
    return rnd.choice(FILES + NEW) if rnd.random() < 0.3 else rnd.choice(FILES)


def _value(rnd: random.Random, opt: Option) -> str:
    if opt.role in ("read", "write", "cwd") or rnd.random() < 0.5:
        return rnd.choice(NEW + FILES + ["src", "."])
    return rnd.choice(VALUES)


def _render(rnd: random.Random, spec: Spec, opt: Option) -> list[str]:
    """One option of ``spec`` as words, in one of the forms the program accepts."""
    name = rnd.choice(opt.names)
    if name.startswith("--") and spec.abbrev and rnd.random() < 0.4:
        name = name[: rnd.randint(3, len(name))]  # an abbreviation, maybe ambiguous
    if opt.arity == 0:
        return [name]
    values = [_value(rnd, opt) for _ in range(2 if opt.arity == 2 else 1)]
    if opt.arity == "?":
        if rnd.random() < 0.5:
            return [name]
        return [f"{name}={values[0]}" if name.startswith("--") else name + values[0]]
    if name.startswith("--") and not spec.exact and rnd.random() < 0.5:
        return [f"{name}={values[0]}", *values[1:]]
    if len(name) == 2 and not spec.exact and rnd.random() < 0.4:
        return [name + values[0], *values[1:]]
    return [name, *values]


def _bundle(rnd: random.Random, spec: Spec) -> list[str]:
    """Short flags bundled into one word, the last one possibly taking a value."""
    if spec.exact:
        return []
    flags = [k for k, o in spec.short.items() if o.arity == 0 and len(k) == 1]
    valued = [k for k, o in spec.short.items() if o.arity in (1, "?") and len(k) == 1]
    if not flags:
        return []
    word = "-" + "".join(rnd.sample(flags, min(len(flags), rnd.randint(1, 3))))
    if valued and rnd.random() < 0.5:
        ch = rnd.choice(valued)
        word += ch + rnd.choice(NEW + VALUES)
    return [word]


def pairs(programs: list[Spec_], seed: int) -> tuple[list[tuple[Spec_, Option]], ...]:
    """Every (program, option) pair, and those whose option writes, runs or reads, each
    in a seeded order: the generator sweeps both so that a long run covers them all."""
    every = [(p, o) for p in programs for o in p.spec.options()]
    roles = [(p, o) for p, o in every if o.role]
    rnd = random.Random(seed)
    rnd.shuffle(every)
    rnd.shuffle(roles)
    return every, roles


def simple_command(rnd: random.Random, programs: list[Spec_],
                   first: tuple[Spec_, Option] | None = None) -> str:
    prog = first[0] if first else rnd.choice(programs)
    words = prog.name.split()
    if first is not None:
        words += _render(rnd, prog.spec, first[1])
    opts = prog.spec.options()
    for _ in range(rnd.randint(0, 2)):
        r = rnd.random()
        if r < 0.6 and opts:
            words += _render(rnd, prog.spec, rnd.choice(opts))
        elif r < 0.85:
            words += _bundle(rnd, prog.spec)
        else:
            words.append(rnd.choice(["--bogus", "-Z", "--output=pwned", "--in-place", "-i",
                                     "--ex", "--comp", "-O", "--exec=touch", "-e"]))
    words += prog.operands
    for _ in range(rnd.randint(0, 2)):
        words.append(_file(rnd))
    return " ".join(_quote(w) for w in words)


def _quote(word: str) -> str:
    if word and all(c.isalnum() or c in "-_./=,:%@+" for c in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


WRAP = [
    "{c}", "{c}", "{c} | head -5", "{c} && echo ok", "( {c} )", "{{ {c}; }}",
    "x=$({c}); echo \"$x\"", "for f in src/*.py; do {c}; done", "{c} 2>/dev/null",
    "{c} > /dev/null 2>&1", "{c} > /dev/stdout", "{c} > /dev/fd/1", "{c} >&2",
    "{c} > out.txt", "{c} >> src/app.py", f"{{c}} > {PLANS}/p.md", f"{{c}} >> {PLANS}/p.md",
    "{c} < data.txt", "{{ {c} > /dev/fd/3; }} 3< src/app.py",
    "{c} > /dev/fd/../cwd/pwned", "{c} > /proc/self/cwd/pwned",
    "{{ echo x > /dev/stdin; }} < src/app.py; {c}", "env --chdir=src {c}", "env -C src {c}",
    "timeout 5 {c}", "nice -n 1 {c}", "xargs -e {c} < data.txt", "command {c}",
    "x='a[$(touch pwned)]'; echo $((x)); {c}", "[[ -v 'a[$(touch pwned)]' ]]; {c}",
    "[ -v 'a[$(touch pwned)]' ]; {c}", "test -v 'a[$(touch pwned)]'; {c}",
    "unset 'a[$(touch pwned)]'; {c}", "declare 'a[$(touch pwned)]=1'; {c}",
    "printf -v 'a[$(touch pwned)]' %s 1; {c}", "read 'a[$(touch pwned)]' < data.txt; {c}",
    "x='$(touch pwned)'; echo ${{x@P}}; {c}", "x='a[$(touch pwned)]'; y=abc; echo ${{y:x}}",
    "x='a[$(touch pwned)]'; [[ x -eq 1 ]]; {c}", "wait -p 'a[$(touch pwned)]'; {c}",
    "mapfile 'a[$(touch pwned)]' < data.txt; {c}", "getopts a 'a[$(touch pwned)]'; {c}",
]


def command(rnd: random.Random, programs: list[Spec_],
            first: tuple[Spec_, Option] | None = None) -> str:
    c = simple_command(rnd, programs, first) if rnd.random() < 0.95 else rnd.choice(SIMPLE)
    wrapped = (rnd.choice(WRAP) if rnd.random() < 0.5 else "{c}").format(c=c)
    if rnd.random() < 0.15:
        wrapped = f"{wrapped}; {simple_command(rnd, programs)}"
    return wrapped


# --------------------------------------------------------------------------- bytes mode

#: what may stand where a parser and bash could disagree: every control character but NUL
#: (argv cannot hold one), backslash combinations, Unicode spaces and format characters,
#: a stray `$`
BYTES = ([chr(c) for c in range(1, 32)] + ["\x7f"]
         + ["\\" + c for c in (" ", "\t", "\v", "\f", "\r", "\r\n", "\n", "#", "$", "'", '"',
                               "\\", "")]
         + ["\u00a0", "\u2028", "\u3000", "\ufeff", "\u0085", "\u200b", "$", "$ ", "\\ \\ "])
#: a payload hidden behind {b} if a parser takes {b} for a blank, a comment or a line end
HIDERS = ["ls{b}#{b}; touch pwned", "ls {b}#; touch pwned", "echo x{b}touch pwned",
          "x={b}#; touch pwned", "echo a{b}\ntouch pwned", "cat data.txt {b}# | touch pwned",
          "echo '{b}' #'; touch pwned", "echo \"{b}\" #\"; touch pwned", "true {b}; touch pwned",
          "ls {b}{b}#; touch pwned", "echo $'{b}' #'; touch pwned", "echo {b}$(touch pwned)",
          "# {b}\ntouch pwned", "sed -e 'a\\'{b} -e 'w pwned' data.txt"]
HEREDOC_STARTS = [("EOF", "EOF"), ("'EOF'", "EOF"), ('"EOF"', "EOF"), ("\\EOF", "EOF"),
                  ('E"O"F', "EOF"), ("E$x", "E$x"), ('"E$x"', "E$x"), ("E\\ F", "E F"),
                  ("-", "-"), ("E.F", "E.F")]
PAYLOADS = ["$(touch pwned)", "`touch pwned`", "${x:-$(touch pwned)}", "$[$(touch pwned)]",
            "$((0$(touch pwned)))", "${x@P}"]
PS4_SETS = ["PS4='{p}'", "export PS4='{p}'", "declare PS4='{p}'", "read -r PS4 <<< '{p}'",
            "printf -v PS4 %s '{p}'", "for PS4 in '{p}'; do :; done",
            "case a in a) PS4='{p}';; esac", "unset PS4; : ${{PS4:='{p}'}}",
            "unset PS4; [[ ${{PS4:='{p}'}} ]]", "typeset -x PS4='{p}'", "local PS4='{p}'",
            "PROMPT_COMMAND='{p}'", "x='{p}'"]
TRACES = ["set -x; [[ 1 ]]", "set -o xtrace; x=1", "set -x; case a in a) ;; esac", "set -x; ls",
          "bash -xc true", "echo \"${{x@P}}\"", "BASH_ENV=evil.sh bash -c true",
          "ENV=evil.sh sh -c true", "env 'BASH_FUNC_true%%=() {{ touch pwned; }}' bash -c true"]


def bytes_command(rnd: random.Random) -> str:
    """A command whose meaning depends on how a byte, a heredoc or a value is read."""
    r = rnd.random()
    if r < 0.5:
        return rnd.choice(HIDERS).replace("{b}", rnd.choice(BYTES))
    if r < 0.75:
        start, end = rnd.choice(HEREDOC_STARTS)
        op = rnd.choice(["<<", "<<-"])
        tab = rnd.choice(["", "\t", " "])
        if rnd.random() < 0.3:  # does the body end where it seems to?
            body = f"{tab}{end}\ntouch pwned\n{end}"
        else:
            body = f"{tab}{rnd.choice(PAYLOADS)}\n{rnd.choice([tab, ''])}{end}"
        prefix = "x='$(touch pwned)'; " if "@P" in body else ""
        return f"{prefix}cat {op}{start}\n{body}"
    payload = rnd.choice(["$(touch pwned)", "`touch pwned`"])
    return rnd.choice(PS4_SETS).format(p=payload) + "; " + rnd.choice(TRACES)


# --------------------------------------------------------------------------- fuzz mode

#: bytes a mutation inserts: structure for bash, no path characters (a mutated command
#: stays in the scratch worktree)
MUTATION_BYTES = (["\v", "\f", "\r", "\t", "\n", " ", "\\", "$", "'", '"', "#", ";", "&", "|",
                   "(", ")", "{", "}", "<", ">", "`", "!", "*", "=", "@", "\x1b", "\u00a0"]
                  + [chr(c) for c in range(1, 32)])
#: corpus commands left out of the fuzz: they name paths outside the scratch tree, talk to
#: the network or to processes of the machine running the campaign
_FOREIGN = re.compile(r"(^|[\s'\"=:<>(])(/|~)|\.\.|\$HOME|\b(kill|pkill|killall|reboot|shutdown|"
                      r"halt|poweroff|mount|umount|sysctl|iptables|ip|chroot|nsenter|docker|"
                      r"podman|systemctl|crontab|curl|wget|ssh|scp|nc|ncat|socat|tmux|screen|"
                      r"sudo|su|doas|git|gh|kubectl|terraform|npm|pip|cargo|apt|prlimit|"
                      r"renice|gdb|strace|dd|xdg-open|open|python3?|node|perl|ruby)\b")


def _corpus() -> list[str]:
    import tomllib

    cases = tomllib.loads(Path(__file__).with_name("redteam.toml").read_text("utf-8"))["case"]
    return [c["bash"] for c in cases if "bash" in c and not _FOREIGN.search(c["bash"])]


_CORPUS: list[str] = []


def fuzz_command(rnd: random.Random) -> str:
    """A red-team corpus command with one to three bytes inserted, deleted or replaced."""
    if not _CORPUS:
        _CORPUS.extend(_corpus())
    text = rnd.choice(_CORPUS)
    for _ in range(rnd.randint(1, 3)):
        i = rnd.randint(0, len(text))
        op = rnd.random()
        if op < 0.5 or not text:
            text = text[:i] + rnd.choice(MUTATION_BYTES) + text[i:]
        elif op < 0.75:
            text = text[:i] + text[i + 1 :]
        else:
            text = text[:i] + rnd.choice(MUTATION_BYTES) + text[i + 1 :]
    if _FOREIGN.search(text) or "\x00" in text:
        return "true"
    return text


# --------------------------------------------------------------------------- mini mode

SED_DELIMS = ["/", "|", ",", "#", "!", ":", "@", "x", "\\", "\n", " ", "[", "]", ";"]


def _sed_part(rnd: random.Random, d: str) -> str:
    return rnd.choice(["a", "[/]", "[|]", f"\\{d}", "\\\\", "[^]/]", "[[:alpha:]/]", "b.*",
                       "touch pwned", "", f"a\\{d}b", "[\\]", "#"])


def sed_script(rnd: random.Random) -> str:
    """A sed script from sed's grammar, its dangerous commands included."""
    out = []
    for _ in range(rnd.randint(1, 3)):
        r = rnd.random()
        addr = rnd.choice(["", "", "1", "$", "/a/", "\\%a%", "1,2", "/[/]/", "0~2", "2!"])
        if r < 0.5:
            d = rnd.choice(SED_DELIMS)
            flags = rnd.choice(["", "g", "p", "e", "w pwned", "g#c", "2", "I", "ge", "#e",
                                " e", "m", "w\tpwned"])
            out.append(f"{addr}s{d}{_sed_part(rnd, d)}{d}{rnd.choice(['touch pwned', 'X', ''])}"
                       f"{d}{flags}")
        elif r < 0.65:
            out.append(addr + rnd.choice(["p", "d", "=", "n", "N", "l", "q", "z", "x", "G"]))
        elif r < 0.8:
            out.append(addr + rnd.choice(["e touch pwned", "w pwned", "W pwned", "r data.txt",
                                          "R data.txt", "e", "F"]))
        elif r < 0.9:
            out.append(addr + rnd.choice(["a text", "a\\", "a\\$", "i\\", "c\\ x", "a \\",
                                          "a\\\ntext", "i x"]))
        else:
            out.append(addr + rnd.choice(["{p}", "{p;w pwned}", "y/ab/cd/", ":a", "b", "#c",
                                          "}", "{"]))
    script = rnd.choice([";", "\n", " ; "]).join(out)
    parts = script.split("\n") if rnd.random() < 0.5 else [script]
    words = " ".join(f"-e {_quote(p) if p else chr(39) * 2}" for p in parts)
    if rnd.random() < 0.3:
        words = rnd.choice(["-n ", "-E ", "-s ", "-z "]) + words
    return f"sed {words} data.txt"


def mini_command(rnd: random.Random) -> str:
    """A sed script (mostly), or another mini-language the tables admit."""
    r = rnd.random()
    if r < 0.8:
        return sed_script(rnd)
    if r < 0.87:
        return rnd.choice(["find . -name '*.py' -exec cat {} +", "find . -fprint pwned",
                           "find . -exec touch pwned \\;", "find . -okdir touch pwned \\;",
                           "find . -fprintf pwned %p", "find src -newer data.txt -print"])
    if r < 0.94:
        return rnd.choice(["xargs touch < data.txt", "echo pwned | xargs touch",
                           "xargs -I{} touch {} < data.txt", "xargs -a data.txt cat",
                           "echo x | xargs -0 sh -c 'touch pwned'", "xargs -E a cat < data.txt"])
    return rnd.choice(["jq -n 1", "jq -r .a data.txt", "jq -n 'input' data.txt",
                       "jq -n '$ENV.HOME'", "jq -n 'import \"data\" as $d; $d'",
                       "awk '{print}' data.txt", "awk 'BEGIN{system(\"touch pwned\")}'",
                       "git -c core.pager=touch log", "git -c diff.autoRefreshIndex=false diff"])


GENERATORS = {"bytes": bytes_command, "fuzz": fuzz_command, "mini": mini_command}


# --------------------------------------------------------------------------- scratch world


def make_scratch(base: Path) -> tuple[Path, dict[str, str]]:
    """A scratch worktree (committed, index fresh) with its own HOME and TMPDIR."""
    repo = base / "repo"
    home = base / "home"
    tmp = base / "tmp"
    for d in (repo / "src", repo / "doc", repo / PLANS, home, tmp):
        d.mkdir(parents=True, exist_ok=True)
    contents = {"src/app.py": "print('hi')\n", "src/util.py": "def f():\n    return 1\n",
                "README.md": "# demo\n", "data.txt": "b\na\nc\n", "nums.txt": "3\n1\n2\n",
                "doc/guide.md": "guide\n", ".env": "TOKEN=secret\n",
                f"{PLANS}/p.md": "# plan\n", "evil.sh": "touch pwned\n"}
    for rel, text in contents.items():
        (repo / rel).write_text(text)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(tmp), "LANG": "C",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t.invalid"}
    old = 1_600_000_000
    for p in repo.rglob("*"):
        os.utime(p, (old, old))  # no racily clean index entries
    subprocess.run(["git", "init", "-q"], cwd=repo, env=env, check=True, capture_output=True)
    (repo / ".git" / "info" / "exclude").write_text(".openoxide/\n")  # the plan is not tracked
    for args in (["add", "-A"], ["commit", "-qm", "init"], ["status"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    for p in repo.rglob("*"):
        if ".git" not in p.parts:
            # the index's stat cache is stale, as in any worktree after an edit: a command
            # that refreshes it (git status) rewrites .git/index and is caught
            os.utime(p, (old + 100, old + 100))
    return repo, env


def snapshot(root: Path, skip: Path) -> dict[str, tuple[object, ...]]:
    """Everything below ``root`` except ``skip`` (the plan directory)."""
    out: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == skip:
            dirnames[:] = []
            continue
        for name in [*dirnames, *filenames]:
            p = here / name
            if p == skip:
                continue
            st = os.lstat(p)
            rel = str(p.relative_to(root))
            if stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", st.st_mode, st.st_uid, st.st_gid)
            elif stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                digest = hashlib.sha1(p.read_bytes()).hexdigest()
                out[rel] = ("file", st.st_mode, st.st_uid, st.st_gid, st.st_size,
                            st.st_mtime_ns, st.st_ctime_ns, st.st_nlink, digest)
            else:
                out[rel] = ("other", st.st_mode)
    return out


def _reset_plans(plans: Path) -> None:
    shutil.rmtree(plans, ignore_errors=True)
    plans.mkdir(parents=True)
    (plans / "p.md").write_text("# plan\n")


@dataclass
class Result:
    cases: int = 0
    allowed: int = 0
    escapes: list[str] = field(default_factory=list)
    timeouts: int = 0


def direct_on_codex(guard: Guard, repo: Path) -> Callable[[str], bool]:
    """Whether the Codex hook lets a plan-mode command run directly (the grammar and the
    confined form of guard.sandbox.direct): its gate, as the hook builds it."""
    from guard.gate import Gate, ToolCall, VerdictAction
    from guard.sandbox.direct import GrammarConfiner

    gate = Gate(guard=guard, agent="plan", env={}, sessions=False, confiner=GrammarConfiner())

    def allowed(cmd: str) -> bool:
        verdict = gate.decide(ToolCall("codex", "Bash", {"command": cmd}, str(repo)))
        return verdict.action is VerdictAction.ALLOW

    return allowed


def run(cases: int, seed: int, base: Path, budget_s: float | None = None,
        mode: str = "grammar", host: str = "claude-code") -> Result:
    """Generate and check ``cases`` commands (fewer when ``budget_s`` seconds run out:
    the seeded sequence is the same, a slow machine checks a shorter prefix of it).

    ``mode``: "grammar" (programs and options from the tables), "bytes" (byte classes,
    backslash combinations, heredoc forms, PS4/set -x and other run-time code), "fuzz"
    (the red-team corpus mutated byte by byte), "mini" (sed scripts and the other
    mini-languages; a sed script guard accepts must also pass GNU sed's --sandbox).

    ``host``: "claude-code" (what the analysis allows; run with bash) or "codex" (what
    the Codex hook lets run directly in plan mode, guard's grammar; run with bash and
    with dash, which read it alike)."""
    import time

    deadline = None if budget_s is None else time.monotonic() + budget_s
    rnd = random.Random(seed)
    programs = _programs()
    repo, env = make_scratch(base)
    plans = repo / PLANS
    guard = Guard.load("builtin:default", worktree=repo)
    result = Result()
    timeouts = 0
    direct = direct_on_codex(guard, repo) if host == "codex" else None
    shells = ["bash", "dash"] if host == "codex" else ["bash"]
    before = snapshot(base, plans)
    every, roles = pairs(programs, seed)
    for k in range(cases):
        if deadline is not None and time.monotonic() > deadline:
            break
        if mode == "grammar":
            first = roles[(k // 2) % len(roles)] if k % 2 else every[(k // 2) % len(every)]
            cmd = command(rnd, programs, first)
        else:
            cmd = GENERATORS[mode](rnd)
        result.cases += 1
        if direct is not None:
            if not direct(cmd):
                continue
        elif not guard.decide(
                "plan", effects_for("claude-code", "Bash", {"command": cmd}, str(repo)), repo
        ).allowed:
            continue
        result.allowed += 1
        if mode == "mini" and cmd.startswith("sed "):
            sandboxed = subprocess.run(["bash", "--norc", "-c", "sed --sandbox" + cmd[3:]],
                                       cwd=repo, env=env, stdin=subprocess.DEVNULL,
                                       capture_output=True, text=True, timeout=10,
                                       check=False)
            if "sandbox" in sandboxed.stderr:
                result.escapes.append(f"case {k}: {cmd!r} allowed, but GNU sed --sandbox"
                                      f" refuses it: {sandboxed.stderr.strip()}")
                print("  ESCAPE", result.escapes[-1], flush=True)
        for shell in shells:
            argv = [shell, "--norc", "--noprofile", "-c", cmd] if shell == "bash" else [
                shell, "-c", cmd]
            proc = subprocess.Popen(argv, cwd=repo, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True)
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                timeouts += 1
        after = snapshot(base, plans)
        if after != before:
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            result.escapes.append(f"case {k}: {cmd!r} changed {changed}")
            print("  ESCAPE", result.escapes[-1], flush=True)
            shutil.rmtree(base)
            base.mkdir()
            repo, env = make_scratch(base)
            plans = repo / PLANS
            before = snapshot(base, plans)
        _reset_plans(plans)
    result.timeouts = timeouts
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mode", choices=["grammar", *GENERATORS], default="grammar")
    ap.add_argument("--host", choices=["claude-code", "codex"], default="claude-code")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="guard-diff-") as tmp:
        res = run(args.cases, args.seed, Path(tmp) / "scratch", mode=args.mode, host=args.host)
    print(f"{res.cases} commands generated, {res.allowed} allowed and executed,"
          f" ({res.timeouts} stopped after 2 s), {len(res.escapes)} changed something outside"
          " the plan directory")
    for e in res.escapes:
        print("  ESCAPE", e)
    sys.exit(1 if res.escapes else 0)


if __name__ == "__main__":
    main()
