"""What the walk knows while it goes: working directories, taint, and the effects found.

Program handlers receive a :class:`Ctx` and never import the walker: they run an
inner command line through :meth:`Ctx.run` (``sudo ls`` runs ``ls``) and a shell
script given as text through :meth:`Ctx.nested` (``bash -c '...'``). The walker
installs both callbacks when it creates the first context.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from guard.analysis.dialect import glob_base
from guard.analysis.shell.words import Arg
from guard.effects import Effect, EffectKind

MAX_CWDS = 16  # possible working directories tracked before giving up on precision

SILENT_READS = frozenset({"/dev/zero", "/dev/urandom", "/dev/random", "/dev/null", "/dev/stdin"})
#: write targets that change nothing on disk
SILENT_WRITES = frozenset({"/dev/null", "/dev/tty", "/dev/zero", "/dev/full"})
#: write targets that are one of the process's open descriptors: exactly these texts
_DESCRIPTOR = re.compile(r"/dev/fd/\d+|/dev/std(in|out|err)")
#: every silent target and descriptor text starts with this: :meth:`Ctx.read` and
#: :meth:`Ctx.write` look them up only for texts that do
_DEV = "/dev/"
if not all(t.startswith(_DEV) for t in SILENT_READS | SILENT_WRITES):
    raise ValueError("a silent target outside /dev/: Ctx.read and Ctx.write would miss it")


@dataclass
class Descriptors:
    """Shared by a whole command line: files opened for reading on a descriptor
    (``3< f``, ``< f``), and whether something writes through ``/dev/fd/N`` or
    ``/dev/std*``. Writing ``/dev/fd/3`` reopens the file descriptor 3 holds, by path,
    for writing: ``{ echo x > /dev/fd/3; } 3< src/app.py`` rewrites ``src/app.py``."""

    inputs: list[str | None] = field(default_factory=list)
    written: list[str] = field(default_factory=list)

    def effects(self) -> list[Effect]:
        if not self.written:
            return []
        how = ", ".join(sorted(set(self.written)))
        return [Effect.write(t, f"written through {how}: the descriptor may hold this file,"
                                " opened by a redirection") for t in self.inputs]

# Variables whose assignment changes what later commands do (which program runs, what a
# program loads or executes). Anything not known to be harmless counts.
_HARMLESS_VARS = re.compile(
    r"^(LANG|LANGUAGE|LC_[A-Z]+|TZ|NO_COLOR|CLICOLOR|COLUMNS|LINES|TERM|FORCE_COLOR"
    r"|GREP_COLOR|GREP_COLORS|[a-z_][a-z0-9_]*)$"
)
# Lower-case names are script variables, but a few are read by programs anyway.
_DANGEROUS_LOWER = frozenset({"http_proxy", "https_proxy", "all_proxy", "no_proxy"})


#: variables whose values bash evaluates as code at run time: the prompts (PS4 is expanded,
#: command substitutions included, before every command traced under ``set -x``, be it
#: ``[[ ]]``, ``case`` or an assignment), PROMPT_COMMAND, BASH_ENV and ENV (a file each new
#: non-interactive bash or sh runs), SHELLOPTS and BASHOPTS (options such as xtrace a new
#: bash starts with), BASH_XTRACEFD (where the trace is written)
EVAL_VARS = frozenset({"PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "BASH_ENV", "ENV",
                       "SHELLOPTS", "BASHOPTS", "BASH_XTRACEFD"})


def evaluates_code(name: str) -> bool:
    """Whether assigning ``name`` hands bash code to run later (:data:`EVAL_VARS`, or
    ``BASH_FUNC_x%%``, a function a new bash imports from its environment)."""
    return name in EVAL_VARS or name.startswith("BASH_FUNC_")


def is_dangerous_var(name: str) -> bool:
    """Whether setting ``name`` can change what a later program does."""
    return not _HARMLESS_VARS.match(name) or name in _DANGEROUS_LOWER


#: effects by (kind, target, detail): commands repeat them, and an Effect is immutable,
#: so one object serves them all (bounded, cleared when full)
_EFFECTS: dict[tuple[EffectKind, str | None, str], Effect] = {}
_EFFECTS_LIMIT = 1 << 13


@dataclass(frozen=True, slots=True)
class Walker:
    """The walker's entry points, handed to program handlers through the context."""

    command: Callable[[Ctx, list[Arg], str | None], None]
    source: Callable[[str, Ctx], None]


def _no_walker() -> Walker:
    def command(ctx: Ctx, argv: list[Arg], heredoc: str | None) -> None:
        raise RuntimeError("shell context without a walker")

    def source(text: str, ctx: Ctx) -> None:
        raise RuntimeError("shell context without a walker")

    return Walker(command, source)


@dataclass(slots=True)
class Ctx:
    """What the walk knows so far, and the effects it found."""

    depth: int = 0
    cwd: str | None = None  # the call's working directory, to look at the filesystem
    cwds: list[str | None] = field(default_factory=lambda: [""])
    tainted: str | None = None  # why later programs cannot be trusted to be what they seem
    effects: list[Effect] = field(default_factory=list)
    seen: set[tuple[EffectKind, str | None, str]] = field(default_factory=set)
    walker: Walker = field(default_factory=_no_walker)
    fds: Descriptors = field(default_factory=Descriptors)

    def add(self, effect: Effect) -> None:
        key = (effect.kind, effect.target, effect.detail)
        if key not in self.seen:
            self.seen.add(key)
            self.effects.append(effect)

    def _add(self, kind: EffectKind, target: str | None, detail: str) -> None:
        """``add(Effect(kind, target, detail))``, the Effect shared through ``_EFFECTS``."""
        key = (kind, target, detail)
        if key not in self.seen:
            self.seen.add(key)
            e = _EFFECTS.get(key)
            if e is None:
                if len(_EFFECTS) >= _EFFECTS_LIMIT:
                    _EFFECTS.clear()
                e = _EFFECTS[key] = Effect(kind, target, detail)
            self.effects.append(e)

    def targets(self, arg: Arg | str | None) -> list[str | None]:
        """Where a path word points, once for each possible working directory."""
        text = arg.literal if isinstance(arg, Arg) else arg
        if text is None or text == "":
            return [None]
        if text.startswith(("/", "~")):
            return [text]
        cwds = self.cwds
        if len(cwds) == 1 and cwds[0] == "":  # no cd seen: the path as written
            return [text]
        out: list[str | None] = []
        for cwd in cwds:
            if cwd is None:
                out.append(None)
            else:
                joined = posixpath.join(cwd, text) if cwd else text
                out.append(joined)
        return out

    def path(self, kind: EffectKind, arg: Arg | str | None, detail: str) -> None:
        if kind is EffectKind.READ and isinstance(arg, Arg):
            if arg.pipe:
                return  # <(...) is a pipe; its command is analysed on its own
            if arg.glob and arg.text:
                # a glob reads only below its literal directory part
                for target in self.targets(glob_base(arg.text)):
                    self._add(kind, target, detail)
                return
        for target in self.targets(arg):
            self._add(kind, target, detail)

    def is_dir(self, target: str) -> bool | None:
        """Whether ``target`` names a directory now; None when there is no cwd to ask."""
        if os.path.isabs(target):
            return os.path.isdir(target)
        if target.startswith("~"):
            return os.path.isdir(os.path.expanduser(target))
        if self.cwd is None:
            return None
        return os.path.isdir(os.path.join(self.cwd, target))

    def read(self, arg: Arg | str | None, detail: str) -> None:
        text = arg.literal if isinstance(arg, Arg) else arg
        if text is not None and text.startswith(_DEV) and (
                text in SILENT_READS or _DESCRIPTOR.fullmatch(text)):
            return
        self.path(EffectKind.READ, arg, detail)

    def write(self, arg: Arg | str | None, detail: str) -> None:
        text = arg.literal if isinstance(arg, Arg) else arg
        if text is None or not text.startswith(_DEV):
            self.path(EffectKind.WRITE, arg, detail)  # neither silent nor a descriptor
            return
        if text in SILENT_WRITES:
            return
        if _DESCRIPTOR.fullmatch(text):
            self.fds.written.append(text)  # resolved against the redirections at the end
            return
        self.path(EffectKind.WRITE, arg, detail)

    def cache_write(self, arg: str | None, detail: str) -> None:
        """A write of a cache the program skips when it cannot write it (``Effect.cache``)."""
        for target in self.targets(arg):
            self.add(Effect(EffectKind.WRITE, target, detail, cache=True))

    def input_redirect(self, arg: Arg) -> None:
        """A file opened for reading on a descriptor (``N< file``)."""
        text = arg.literal
        if text in SILENT_READS or (text is not None and _DESCRIPTOR.fullmatch(text)):
            return
        self.fds.inputs.extend(self.targets(arg))

    def create_node(self, arg: Arg | str | None, what: str, detail: str) -> None:
        """A write that makes ``arg`` something other than a regular file (``what``: "a
        symlink", "a FIFO"...): never a plan file, whatever its name."""
        for target in self.targets(arg):
            self.add(Effect(EffectKind.WRITE, target, detail, creates=what))

    def delete(self, arg: Arg | str | None, detail: str) -> None:
        self.path(EffectKind.DELETE, arg, detail)

    def unknown_exec(self, detail: str) -> None:
        self._add(EffectKind.EXEC, None, detail)

    def unknown_write(self, detail: str) -> None:
        self._add(EffectKind.WRITE, None, detail)

    def not_read_only(self, detail: str) -> None:
        """The command may write anything or run anything: an unknown write and exec."""
        self._add(EffectKind.EXEC, None, detail)
        self._add(EffectKind.WRITE, None, detail)

    def network(self, host: str | None, detail: str, *, changes_remote: bool = False) -> None:
        """A connection to ``host`` (None: unknown); ``changes_remote``: it may change
        something there (a POST, a push, a publish), which plan mode refuses."""
        self.add(Effect.network(host, detail, changes_remote=changes_remote))



    # ---- the walker's seam

    def child(self, cwds: list[str | None] | None = None) -> Ctx:
        """A context for an inner command or script: one level deeper, same knowledge."""
        return Ctx(depth=self.depth + 1, cwd=self.cwd,
                   cwds=list(self.cwds) if cwds is None else cwds,
                   tainted=self.tainted, walker=self.walker, fds=self.fds)

    def run(self, argv: list[Arg], heredoc: str | None) -> None:
        """Analyse ``argv`` as a command run here (by a wrapper such as ``sudo``)."""
        if argv:
            self.walker.command(self, argv, heredoc)

    def nested(self, source: str, how: str) -> None:
        """Analyse ``source`` as a shell script run by a nested shell (``bash -c``)."""
        sub = self.child()
        self.walker.source(source, sub)
        for e in sub.effects:
            self.add(e)
        self.cwds = merge_cwds(self.cwds, sub.cwds)
        self.tainted = self.tainted or sub.tainted

    # ---- shell state

    def chdir(self, arg: Arg | None) -> None:
        """``cd ARG``: one more possible working directory (None: computed, ``~``: home)."""
        if arg is None:
            new: list[str | None] = ["~"]
        elif arg.literal is None or arg.text == "-":
            new = [None]
        else:
            new = list(self.targets(arg))
        self.cwds = merge_cwds(self.cwds, new)

    def taint_if_dangerous(self, name: str) -> None:
        if evaluates_code(name):
            self.not_read_only(f"{name} is set: bash evaluates its value as code at run time"
                               " (prompts and set -x, new shells)")
        if is_dangerous_var(name):
            self.tainted = self.tainted or f"the script sets {name}, which changes what programs do"


def merge_cwds(old: list[str | None], new: list[str | None]) -> list[str | None]:
    out = list(old)
    for c in new:
        if c not in out:
            out.append(c)
    if len(out) > MAX_CWDS:
        out = [c for c in out[:MAX_CWDS]]
        if None not in out:
            out.append(None)
    return out
