"""Run a command of guard's grammar with real bash and dash, and compare with guard's reading.

Every program name the generator uses is a link to one small C program (built once,
:func:`build_recorder`) that appends to a record file its argv and where its standard
streams point (the inherited files, a pipe, ``/dev/null``), then exits with the status
``$GRAMMAR_STATUS`` names. :func:`shell_reading` runs a command with a shell twice (every
program succeeding, then every program failing, which tells ``&&``, ``||`` and ``;``
apart) and returns the records; :func:`guard_reading` predicts the same records from
:func:`guard.analysis.shell.grammar.parse`'s tree (its globs expanded as the shells do,
in the C locale). A pipeline's programs run at once, so the records of one pipeline
are compared as a sorted group.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from guard.analysis.shell.grammar import Sentence

#: Program names the generator uses: links to the recorder (none is a builtin of either shell).
PROGRAMS = ("ls", "grep", "cat", "wc", "git", "sed", "head", "tail", "sort", "find", "rg",
            "awk", "diff", "tree", "stat", "file", "cut", "uniq", "nl", "du", "basename")

RECORDER_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char out[1 << 20];
static size_t n;

static void put(const char *s) {
    size_t k = strlen(s);
    if (n + k < sizeof out) { memcpy(out + n, s, k); n += k; }
}

static void hex(const char *s) {
    static const char d[] = "0123456789abcdef";
    char b[3] = {0, 0, 0};
    for (; *s; s++) { b[0] = d[(unsigned char)*s >> 4]; b[1] = d[*s & 15]; put(b); }
}

int main(int argc, char **argv) {
    const char *rec = getenv("GRAMMAR_RECORD");
    const char *st = getenv("GRAMMAR_STATUS");
    for (int i = 0; i < argc; i++) { put(i ? " " : "argv "); put("x"); hex(argv[i]); }
    for (int fd = 0; fd < 3; fd++) {
        char link[64], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t k = readlink(link, target, sizeof target - 1);
        target[k < 0 ? 0 : k] = 0;
        put(" fd x"); hex(k < 0 ? "closed" : target);
    }
    put("\n");
    int f = open(rec, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (f >= 0) { (void)!write(f, out, n); close(f); }
    return st ? atoi(st) : 0;
}
"""

#: Files in the directory the commands run in (globs expand against them).
FILES = ("a.py", "b.py", "notes.txt", "src/x.py", "src/y.txt", "-rf", "--include=zz.py",
         ".hidden")


def build_recorder(where: Path) -> Path:
    """Compile the recorder and link every program name to it; the directory for PATH."""
    src = where / "recorder.c"
    src.write_text(RECORDER_C)
    binary = where / "recorder"
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("no C compiler (cc) to build the argv recorder; install gcc")
    subprocess.run([cc, "-O1", "-o", str(binary), str(src)], check=True, timeout=120)
    bin_dir = where / "bin"
    bin_dir.mkdir()
    for name in PROGRAMS:
        (bin_dir / name).symlink_to(binary)
    return bin_dir


def scratch_dir(where: Path) -> Path:
    run = where / "run"
    (run / "src").mkdir(parents=True)
    for f in FILES:
        (run / f).write_text("x\n")
    return run


@dataclass(frozen=True)
class Streams:
    """The inherited standard streams of a run (files), so that records name them."""

    stdin: Path
    stdout: Path
    stderr: Path


def _label(target: str, streams: Streams) -> str:
    if target.startswith("pipe:"):
        return "pipe"
    return {str(streams.stdin): "in", str(streams.stdout): "out", str(streams.stderr): "err",
            "/dev/null": "null"}.get(target, target)


def _records(path: Path, streams: Streams) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    out = []
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        words = line.split(" ")
        assert words[0] == "argv", line
        fd_at = words.index("fd")
        argv = tuple(bytes.fromhex(w[1:]).decode() for w in words[1:fd_at])
        fds = tuple(_label(bytes.fromhex(w[1:]).decode(), streams)
                    for w in words[fd_at + 1 :: 2])
        out.append((argv, fds))
    return out


Reading = list[list[tuple[tuple[str, ...], tuple[str, ...]]]]


def shell_reading(shell: str, command: str, bin_dir: Path, cwd: Path, status: int) -> Reading:
    """What ``shell -c command`` ran, every program exiting with ``status``: one flat group
    (regrouped by :func:`group_like`)."""
    streams = Streams(cwd.parent / "stdin", cwd.parent / "stdout", cwd.parent / "stderr")
    record = cwd.parent / "record"
    for p in (streams.stdin, streams.stdout, streams.stderr, record):
        p.write_text("")
    env = {"PATH": str(bin_dir), "LC_ALL": "C", "GRAMMAR_RECORD": str(record),
           "GRAMMAR_STATUS": str(status), "HOME": str(cwd)}
    with streams.stdin.open("rb") as i, streams.stdout.open("ab") as o, \
            streams.stderr.open("ab") as e:
        subprocess.run([shutil.which(shell) or shell, "-c", command], cwd=cwd, env=env,
                       stdin=i, stdout=o, stderr=e,
                       timeout=60, check=False)
    return [_records(record, streams)]


def _expand(word: str, spelled: str, cwd: Path) -> list[str]:
    if spelled != word or not (set(word) & set("*?")):
        return [word]
    old = os.getcwd()
    os.chdir(cwd)
    try:
        found = sorted(glob.glob(word), key=lambda s: s.encode())
    finally:
        os.chdir(old)
    return found or [word]


def guard_reading(sentence: Sentence, cwd: Path, status: int) -> Reading:
    """The records guard's reading of ``sentence`` predicts, one group per pipeline run."""
    groups: Reading = []
    last = 0
    for k, pipe in enumerate(sentence.pipelines):
        op = sentence.ops[k - 1] if k else ";"
        if (op == "&&" and last != 0) or (op == "||" and last == 0):
            continue
        group = []
        for j, simple in enumerate(pipe):
            argv: list[str] = []
            for value, spelled in zip(simple.argv, simple.spelled, strict=True):
                argv.extend(_expand(value, spelled, cwd))
            fds = ["pipe" if j else "in", "pipe" if j < len(pipe) - 1 else "out", "err"]
            for r in simple.redirects:
                fds[r.fd] = fds[int(r.target)] if r.op == ">&" else "null"
            group.append((tuple(argv), tuple(fds)))
        groups.append(sorted(group))
        last = status
    return groups


def group_like(flat: Reading, predicted: Reading) -> Reading:
    """The shell's flat records cut into the predicted pipelines' sizes, each sorted."""
    records = flat[0]
    out: Reading = []
    i = 0
    for group in predicted:
        out.append(sorted(records[i : i + len(group)]))
        i += len(group)
    if i < len(records):
        out.append(sorted(records[i:]))
    return out
