"""Network programs (curl, wget, rsync) and build or package tools."""

from __future__ import annotations

import itertools
import re
from typing import Any

from guard.analysis.dialect import url_host
from guard.analysis.shell.context import Ctx
from guard.analysis.shell.option_parser import apply, parse_opts
from guard.analysis.shell.registry import program
from guard.analysis.shell.tables import network_options as tables
from guard.analysis.shell.words import Arg


@program("rsync")
def _rsync(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "efBT", ("--rsh", "--filter", "--exclude", "--include", "--log-file",
                                  "--temp-dir", "--backup-dir", "--rsync-path", "--password-file",
                                  "--files-from", "--exclude-from", "--include-from"))
    if p.has("-e", "--rsh", "--rsync-path"):
        ctx.unknown_exec("rsync -e/--rsync-path runs a program")
    if any((a.text or "-").startswith("-") for a in args):
        ctx.unknown_write("rsync options may write elsewhere (logs, backups, temporary files)")
    if len(p.pos) < 2 or p.dynamic:
        ctx.unknown_write("rsync with a missing or computed operand")
    for i, a in enumerate(p.pos):
        text = a.literal
        remote = text is not None and re.match(r"^[^/]*:", text) is not None
        if remote and text is not None:
            host = text.split(":", 1)[0].split("@")[-1] or None
            ctx.network(host, "rsync talks to a remote host")
        elif i == len(p.pos) - 1 and len(p.pos) >= 2:
            ctx.write(a, "rsync writes the destination")
        else:
            ctx.read(a, "rsync reads the source")
    if p.has("--remove-source-files"):
        for a in p.pos[:-1]:
            ctx.delete(a, "rsync --remove-source-files")
    for v in p.values("--log-file", "--backup-dir", "--temp-dir"):
        ctx.write(v, "rsync writes it")


@program("curl")
def _curl(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = tables.CURL.parse(args)
    if p.error is not None or p.dynamic:
        ctx.network(None, "curl")
        ctx.not_read_only(f"curl: {p.error or 'a computed argument'}; it could write files")
        return
    urls = [*p.pos, *p.values("--url")]
    method, flag = _curl_method(p)
    changes = method not in tables.READ_METHODS
    for u in urls:
        host = url_host(u.literal) if u.literal else None
        if changes:
            ctx.network(host, f"curl {flag} sends a {method} request to {host or 'a server'},"
                              " which may change it", changes_remote=True)
        else:
            ctx.network(host, "curl fetches it")
    if not urls:
        ctx.network(None, "curl with no literal URL", changes_remote=changes)
    writes = [(o, w, [v for v in vs if v.text != "-"]) for o, w, vs in p.roles("write")]
    p.opts = [(o, w, vs) for o, w, vs in p.opts if o.role != "write"]
    apply(ctx, name, tables.CURL, p)
    for _, written, vals in writes:
        for v in vals:
            ctx.write(v, f"curl {written} writes it")
    if p.has("-O", "--remote-name-all", "-J"):
        ctx.unknown_write("curl -O writes a file named by the server or URL")
    for v in p.values("-d", "--data-binary", "-F", "--data-urlencode", "--json"):
        if v.text and "@" in v.text:
            ctx.read(v.text.split("@", 1)[1], "curl uploads it")


_CURL_DATA = ("-d", "--data", "--data-raw", "--data-binary", "--data-urlencode", "--json")
_CURL_FORM = ("-F", "--form", "--form-string")


def _curl_method(p: Any) -> tuple[str, str]:
    """(the HTTP method curl sends, the option that makes it so)."""
    explicit = [v.literal for v in p.values("-X", "--request")]
    if explicit:
        return (explicit[-1] or "?").upper(), f"-X {explicit[-1]}"
    if p.has("-T", "--upload-file"):
        return "PUT", "-T"
    if p.has(*_CURL_FORM):
        return "POST", "-F"
    if p.has(*_CURL_DATA):
        return ("GET", "-G") if p.has("-G", "--get") else ("POST", "-d")
    return ("HEAD", "-I") if p.has("-I", "--head") else ("GET", "")


@program("wget")
def _wget(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = tables.WGET.parse(args)
    if p.error is not None or p.dynamic:
        ctx.network(None, "wget")
        ctx.not_read_only(f"wget: {p.error or 'a computed argument'}; it could write files")
        return
    methods = [v.literal for v in p.values("--method")]
    method = (methods[-1] or "?").upper() if methods else (
        "POST" if p.has("--post-data", "--post-file") else "GET")
    for u in p.pos:
        host = url_host(u.literal) if u.literal else None
        if method not in tables.READ_METHODS:
            ctx.network(host, f"wget sends a {method} request to {host or 'a server'}, which"
                              " may change it", changes_remote=True)
        else:
            ctx.network(host, "wget fetches it")
    outs = p.values("-O")
    p.opts = [(o, w, vs) for o, w, vs in p.opts
              if not ("-O" in o.names and all(v.text == "-" for v in vs))]
    apply(ctx, name, tables.WGET, p)
    if not outs and not p.has("--spider"):
        ctx.unknown_write("wget saves downloads under names taken from the URL")


_PKG_READONLY = {
    "pip": {"list", "show", "freeze", "check", "help", "--version", "search", "index", "inspect"},
    "npm": {"ls", "list", "view", "info", "show", "help", "--version", "outdated", "search",
            "explain", "why", "config_not"},
    "cargo": {"--version", "help", "search", "tree", "metadata", "verify-project", "version"},
}


@program("pip", "pip3", "pipx", "uv", "poetry", "pdm", "conda", "mamba", "npm", "npx", "pnpm",
          "yarn", "bun", "deno", "cargo", "go", "gem", "bundle", "composer", "apt", "apt-get",
          "dpkg", "yum", "dnf", "apk", "brew", "make", "gmake", "cmake", "ninja", "mvn", "gradle",
          "rake", "just", "tox", "nox", "pytest", "docker", "podman", "kubectl", "terraform",
          "systemctl", "service", "mount", "umount", "crontab", "at", "ssh", "scp", "sftp",
          "nc", "ncat", "socat", "telnet", "ftp")
def _builder(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    base = name.rstrip("3")
    sub = next((a.text for a in args if a.text and not a.text.startswith("-")), None)
    _remote_change(ctx, base, args)
    first = args[0].text if args else None
    allowed = _PKG_READONLY.get(base, set())
    if (sub in allowed and not any(a.text is None for a in args)) or first in ("--version",):
        ctx.unknown_exec(f"{name} {sub or first}: runs {name} (its configuration may run code)")
        return
    ctx.unknown_exec(f"{name} runs builds, installs or remote commands")
    ctx.unknown_write(f"{name} {sub or ''}".strip() + " changes files guard cannot name")
    if name in ("pip", "pip3", "npm", "npx", "pnpm", "yarn", "cargo", "go", "gem", "apt",
                "apt-get", "ssh", "scp", "sftp", "nc", "ncat", "socat", "telnet", "ftp",
                "docker", "podman", "uv", "poetry", "bundle", "composer", "brew"):
        ctx.network(None, f"{name} may reach the network")



def _operands(program: str, args: list[Arg]) -> list[str | None]:
    """The words that are not options, skipping the values of the program's global
    options (:data:`tables.GLOBAL_VALUE_OPTIONS`); None for a computed word."""
    takes = tables.GLOBAL_VALUE_OPTIONS.get(program, frozenset())
    out: list[str | None] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a.text is None:
            out.append(None)
        elif a.text.startswith("-"):
            skip = a.text in takes
        else:
            out.append(a.text)
    return out


def _remote_change(ctx: Ctx, program: str, args: list[Arg]) -> None:
    """A subcommand of :data:`tables.REMOTE_CHANGES`: a network effect that changes a
    remote, first, so that a plan-mode refusal names it."""
    changes = tables.REMOTE_CHANGES.get(program)
    if not changes:
        return
    words = _operands(program, args)
    for key in (" ".join(w or "" for w in words[:2]), (words or [None])[0] or ""):
        what = changes.get(key)
        if key and what is not None:
            ctx.network(None, f"{program} {key} {what}", changes_remote=True)
            return


@program("gh")
def _gh(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    """GitHub's CLI: a binary guard does not follow (aliases and extensions run code);
    what it reads and what it changes on GitHub is named."""
    words = _operands(name, args)
    group, verb = [*words, None, None][:2]
    ctx.unknown_exec(f"gh {group or ''}".strip() + " runs GitHub's CLI (aliases and extensions"
                     " run code)")
    if group == "api":
        methods = [v.text for a, v in itertools.pairwise(args) if a.text in ("-X", "--method")]
        fields = any(a.text in ("-f", "-F", "--field", "--raw-field", "--input") for a in args)
        method = (methods[-1] or "?").upper() if methods else ("POST" if fields else "GET")
        if method in tables.READ_METHODS:
            ctx.network(None, f"gh api sends a {method} request to GitHub")
        else:
            ctx.network(None, f"gh api sends a {method} request to GitHub, which may change"
                              " it", changes_remote=True)
        return
    if verb in tables.GH_READ_VERBS or group in ("search", "status", "browse"):
        ctx.network(None, f"gh {group} {verb or ''}".rstrip() + " reads from GitHub")
        return
    what = f"gh {group or ''} {verb or ''}".rstrip()
    if verb in tables.GH_CHANGE_VERBS:
        ctx.network(None, f"{what} changes GitHub (the remote)", changes_remote=True)
    else:
        ctx.network(None, f"{what} talks to GitHub")
    ctx.unknown_write(f"{what}: not known to only read")
