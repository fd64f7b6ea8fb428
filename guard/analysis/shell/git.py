"""git: read-only subcommands read the repository; the rest write it."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from guard.analysis.shell.context import Ctx
from guard.analysis.shell.option_parser import Parsed, Spec, apply
from guard.analysis.shell.registry import program
from guard.analysis.shell.tables import git_options as tables
from guard.analysis.shell.words import Arg

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


#: ``git -c KEY=VALUE`` settings that only stop a write: ``git diff`` refreshes the index's
#: stat cache (even under --no-optional-locks) unless diff.autoRefreshIndex is false
_NO_REFRESH = re.compile(r"diff\.autorefreshindex=(false|no|off|0)", re.IGNORECASE)


def _read_only(ctx: Ctx, sub: str, rest: list[Arg], repo_read: Callable[[], None],
               index_path: Callable[[], str | None], no_locks: bool,
               no_refresh: bool) -> bool:
    """Whether ``git SUB REST`` only reads (its effects then added); False: it may write
    the repository (the caller names how). A read subcommand with an option outside its
    table is reported as not read-only and counts as handled."""

    def parsed(spec: Spec, words: list[Arg]) -> Parsed | None:
        p = spec.parse(words)
        if p.error is not None or p.dynamic:
            why = p.error or "a computed argument that could be an option"
            ctx.not_read_only(f"git {sub}: {why}; it could write files or run programs")
            return None
        apply(ctx, f"git {sub}", spec, p)
        return p

    spec = tables.READ.get(sub)
    if spec is not None:
        p = parsed(spec, rest)
        if p is not None:
            repo_read()
            if p.has("--no-index"):
                for a in p.pos:
                    ctx.read(a, f"git {sub} --no-index reads it")
            elif sub == "diff" and not no_refresh and not p.has("--cached", "--staged"):
                ctx.cache_write(index_path(), "git diff against the working tree rewrites the"
                                " index (its stat cache); `git -c diff.autoRefreshIndex=false"
                                " diff` or `git diff-files -p` only read")
        return True
    if sub == "status":
        # the stat cache in .git/index is rewritten unless optional locks are off
        p = parsed(tables.STATUS, rest)
        if p is not None:
            repo_read()
            if not no_locks:
                ctx.cache_write(index_path(), "git status rewrites the index (its stat cache);"
                                " `git --no-optional-locks status` only reads")
        return True
    if sub == "rev-parse":  # prints names and paths; no option writes or runs anything
        repo_read()
        return True
    words = [a.text for a in rest]
    if sub in ("branch", "tag"):
        p = (tables.BRANCH if sub == "branch" else tables.TAG).parse(rest)
        listing = p.error is None and not p.dynamic and (not p.pos or p.has("-l"))
        if listing:
            repo_read()
        return listing
    if sub == "remote":
        p = tables.REMOTE.parse(rest)
        if p.error is not None or p.dynamic:
            return False
        if not p.pos:
            repo_read()
            return True
        action = p.pos[0].text or ""
        inner = tables.REMOTE_READ.get(action)
        if inner is None:
            return False
        q = parsed(inner, p.pos[1:])
        if q is not None:
            repo_read()
            if action == "show" and not q.has("-n"):
                ctx.network(None, "git remote show asks the remote")
        return True
    if sub == "config":
        p = tables.CONFIG_READ.parse(rest)
        if (p.error is not None or p.dynamic
                or not any(p.has(a) for a in tables.CONFIG_ACTIONS) or len(p.pos) > 2):
            return False
        apply(ctx, "git config", tables.CONFIG_READ, p)
        repo_read()
        return True
    if sub in ("stash", "reflog", "worktree"):
        first = words[0] if words else None
        inner_spec = {("stash", "list"): tables.READ["log"], ("stash", "show"): tables.READ["diff"],
                      ("reflog", "show"): tables.READ["log"], ("reflog", None): tables.READ["log"],
                      ("worktree", "list"): tables.WORKTREE_LIST}.get((sub, first))
        if inner_spec is None:
            return False
        if parsed(inner_spec, rest[1:] if first else rest) is not None:
            repo_read()
        return True
    return False


@program("git")
def _git(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    base: str | None = ""
    no_locks = no_refresh = False
    i = 0
    while i < len(args):
        a = args[i]
        t = a.text
        if t is None:
            ctx.unknown_write("git with a computed argument before its subcommand")
            ctx.unknown_exec("git with a computed argument before its subcommand")
            return
        if t == "-c" and i + 1 < len(args) and _NO_REFRESH.fullmatch(args[i + 1].literal or ""):
            no_refresh = True
            i += 2
            continue
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
        if t in tables.GLOBAL_FLAGS:
            no_locks = no_locks or t == "--no-optional-locks"
            i += 1
            continue
        if t in ("--version", "--help", "-h", "--html-path", "--man-path", "--info-path"):
            return
        if t.startswith("-"):
            ctx.not_read_only(f"git option {t} not analysed (pagers, bare repositories and"
                              " paths chosen on the command line change what git does)")
            return
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

    def repo_read() -> None:
        ctx.read(at(".") if repo is not None else None, f"git {sub} reads the repository")

    if _read_only(ctx, sub, rest, repo_read, lambda: at(".git/index"), no_locks,
                  no_refresh):
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
        if sub == "push":  # first: a plan-mode refusal names the remote change
            ctx.network(None, "git push sends commits to a remote and moves its branches",
                        changes_remote=True)
        ctx.write(at(".git"), f"git {sub} changes the repository")
        if sub in _GIT_TREE:
            ctx.write(at("."), f"git {sub} changes files in the working tree")
        if sub in _GIT_NETWORK and sub != "push":
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

