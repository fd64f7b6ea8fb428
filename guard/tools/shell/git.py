"""git: read-only subcommands read the repository; the rest write it."""

from __future__ import annotations

import posixpath

from guard.tools.shell.context import Ctx
from guard.tools.shell.registry import program
from guard.tools.shell.words import Arg

_GIT_READ = frozenset({
    "status", "log", "diff", "show", "blame", "annotate", "rev-parse", "ls-files", "ls-tree",
    "cat-file", "describe", "shortlog", "grep", "rev-list", "name-rev", "whatchanged",
    "merge-base", "for-each-ref", "show-ref", "show-branch", "version", "help", "count-objects",
    "diff-tree", "diff-files", "diff-index", "check-ignore", "check-attr", "var", "cherry",
    "range-diff", "verify-commit", "verify-tag", "fsck",
})
_GIT_INDEX_ONLY = frozenset({"add", "commit", "stash", "tag", "fetch", "notes", "update-ref",
                             "update-index", "gc", "prune", "repack", "reflog", "replace",
                             "branch", "remote", "symbolic-ref", "push", "submodule",
                             "sparse-checkout", "lfs", "maintenance", "bisect", "filter-branch",
                             "pack-refs", "write-tree", "commit-tree", "mktag", "hash-object",
                             "config", "format-patch", "bundle", "archive"})
_GIT_TREE = frozenset({"checkout", "switch", "reset", "restore", "merge", "rebase", "pull",
                       "apply", "am", "cherry-pick", "revert", "clean", "rm", "mv", "stash",
                       "read-tree", "checkout-index", "worktree", "submodule", "filter-repo",
                       "bisect", "sparse-checkout"})
_GIT_NETWORK = frozenset({"fetch", "pull", "push", "clone", "ls-remote", "submodule",
                          "remote", "archive", "lfs"})
_GIT_READ_OPTS_BAD = ("--output", "--ext-diff", "-O", "--open-files-in-pager", "--exec",
                      "--upload-pack", "--receive-pack")


@program("git")
def _git(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    base: str | None = ""
    i = 0
    while i < len(args):
        a = args[i]
        t = a.text
        if t is None:
            ctx.unknown_write("git with a computed argument before its subcommand")
            ctx.unknown_exec("git with a computed argument before its subcommand")
            return
        if t in ("-c", "--config-env") or (t.startswith(("--config-env=", "--exec-path",
                                                         "-c")) and t != "-C"):
            ctx.unknown_exec(f"git {t}: configuration on the command line can run any program"
                             " (core.fsmonitor, core.hooksPath, aliases, pagers)")
            ctx.unknown_write(f"git {t}: configuration on the command line can write anywhere")
            return
        if t == "-C" and i + 1 < len(args):
            d = args[i + 1].literal
            base = None if d is None else (posixpath.join(base, d) if base else d)
            i += 2
            continue
        if t.startswith(("--git-dir", "--work-tree", "--namespace", "--super-prefix")):
            ctx.unknown_write(f"git {t}: repository chosen on the command line")
            i += 1 if "=" in t else 2
            continue
        if t in ("--no-pager", "-P", "--paginate", "-p", "--no-replace-objects", "--bare",
                 "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs",
                 "--icase-pathspecs", "--no-optional-locks", "--version", "--help", "-h",
                 "--html-path", "--man-path", "--info-path"):
            if t in ("--version", "--help", "-h"):
                return
            i += 1
            continue
        if t.startswith("-"):
            ctx.unknown_exec(f"git option {t} not analysed")
            i += 1
            continue
        break
    if i >= len(args):
        return
    sub = args[i].text or ""
    rest = args[i + 1 :]
    repo = "." if base == "" else base

    def at(path: str) -> str | None:
        if repo is None:
            return None
        return posixpath.normpath(posixpath.join(repo, path)) if repo != "." else path

    rest_texts = [a.text for a in rest]
    dyn = any(t is None for t in rest_texts)
    bad_opt = next((t for t in rest_texts if t and t.startswith(_GIT_READ_OPTS_BAD)), None)

    readonly = sub in _GIT_READ
    if sub == "branch":
        readonly = all(t in ("-a", "-r", "-v", "-vv", "--all", "--remotes", "--show-current",
                             "--list", "-l", "--verbose", "--no-color", "--color",
                             "--merged", "--no-merged", "--contains") for t in rest_texts)
    elif sub == "tag":
        readonly = all(t in ("-l", "--list", "-n") for t in rest_texts) or not rest_texts
    elif sub == "remote":
        readonly = all(t in ("-v", "--verbose", "show", "get-url") or (t and not t.startswith("-")
                       and rest_texts[:1] in (["show"], ["get-url"], ["-v"])) for t in rest_texts)
    elif sub == "config":
        readonly = any(t in ("--get", "--get-all", "--get-regexp", "--list", "-l", "get",
                             "list", "--show-origin") for t in rest_texts) and not any(
            t in ("--add", "--unset", "--unset-all", "--replace-all", "--rename-section",
                  "--remove-section", "-e", "--edit", "set", "unset") for t in rest_texts)
    elif sub == "stash":
        readonly = bool(rest_texts) and rest_texts[0] in ("list", "show")
    elif sub == "worktree":
        readonly = bool(rest_texts) and rest_texts[0] == "list"
    elif sub == "reflog":
        readonly = not rest_texts or rest_texts[0] == "show"
    elif sub == "fsck":
        readonly = not any(t and t.startswith("--lost-found") for t in rest_texts)
    if readonly and (dyn or bad_opt):
        why = f"option {bad_opt}" if bad_opt else "a computed argument"
        ctx.unknown_write(f"git {sub} with {why}: it can write files or run programs")
        if bad_opt and bad_opt.startswith(("--output",)):
            for a in rest:
                if a.text and a.text.startswith("--output="):
                    ctx.write(a.text.split("=", 1)[1], f"git {sub} --output writes it")
        return
    if readonly:
        ctx.read(at(".") if repo is not None else None, f"git {sub} reads the repository")
        if sub in ("diff", "log", "show") and any(t == "--no-index" for t in rest_texts):
            for a in rest:
                if a.text and not a.text.startswith("-"):
                    ctx.read(a, "git diff --no-index reads it")
        return
    if sub == "clone":
        ctx.network(None, "git clone fetches a repository")
        pos = [a for a in rest if a.text and not a.text.startswith("-")]
        if len(pos) >= 2:
            ctx.write(pos[1], "git clone creates it")
        else:
            ctx.unknown_write("git clone creates a directory named after the repository")
        if any(t is None or (t or "").startswith(("-c", "--config", "-u", "--upload-pack",
                                                  "--template")) for t in rest_texts):
            ctx.unknown_exec("git clone option can run programs")
        return
    if sub == "init":
        pos = [a for a in rest if a.text and not a.text.startswith("-")]
        target = pos[0] if pos else Arg(at(".") if repo is not None else None)
        ctx.write(target, "git init creates a repository there")
        if target.literal is not None:
            ctx.write(posixpath.join(target.literal, ".git"), "git init creates .git")
        return
    if sub == "config":
        if any(t in ("--global",) for t in rest_texts):
            ctx.write("~/.gitconfig", "git config --global changes it")
        elif any(t in ("--system",) for t in rest_texts):
            ctx.write("/etc/gitconfig", "git config --system changes it")
        else:
            ctx.write(at(".git/config"), "git config changes the repository configuration")
        files = [a for j, a in enumerate(rest) if j > 0 and rest_texts[j - 1] in ("-f", "--file")]
        for f in files:
            ctx.write(f, "git config --file changes it")
        return
    if sub in _GIT_INDEX_ONLY or sub in _GIT_TREE:
        ctx.write(at(".git"), f"git {sub} changes the repository")
        if sub in _GIT_TREE:
            ctx.write(at("."), f"git {sub} changes files in the working tree")
        if sub in _GIT_NETWORK:
            ctx.network(None, f"git {sub} talks to a remote")
        if sub in ("commit", "merge", "rebase", "am", "push", "checkout", "switch",
                   "cherry-pick", "revert", "pull"):
            ctx.unknown_exec(f"git {sub} runs the repository's hooks")
        if sub == "worktree":
            pos = [a for a in rest[1:] if a.text and not a.text.startswith("-")]
            for a in pos[:1]:
                ctx.write(a, "git worktree add creates it")
        if sub in ("format-patch", "archive", "bundle"):
            ctx.unknown_write(f"git {sub} writes output files")
        return
    if sub == "ls-remote":
        ctx.network(None, "git ls-remote talks to a remote")
        return
    ctx.unknown_exec(f"git {sub}: subcommand not analysed (may be an alias)")
    ctx.unknown_write(f"git {sub}: subcommand not analysed (may be an alias)")

