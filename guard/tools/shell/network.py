"""Network programs (curl, wget, rsync) and build or package tools."""

from __future__ import annotations

import re

from guard.tools.shell.context import Ctx
from guard.tools.shell.options import parse_opts
from guard.tools.shell.registry import program
from guard.tools.shell.words import Arg


@program("rsync")
def _rsync(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "efBT", ("--rsh", "--filter", "--exclude", "--include", "--log-file",
                                  "--temp-dir", "--backup-dir", "--rsync-path", "--password-file",
                                  "--files-from", "--exclude-from", "--include-from"))
    if p.has("-e", "--rsh", "--rsync-path"):
        ctx.unknown_exec("rsync -e/--rsync-path runs a program")
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


_CURL_WRITES = ("-o", "--output", "-D", "--dump-header", "-c", "--cookie-jar", "--trace",
                "--trace-ascii", "--stderr", "--libcurl", "--etag-save", "--hsts", "--alt-svc")


@program("curl")
def _curl(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "odcDHXAeEFTuUxrbKwmyYzCQ",
                   (*_CURL_WRITES, "--data", "--data-binary", "--data-raw", "--header",
                    "--request", "--user-agent", "--form", "--upload-file", "--user", "--proxy",
                    "--cookie", "--config", "--url", "--output-dir", "--max-time", "--retry",
                    "--write-out", "--connect-timeout", "--cacert", "--cert", "--key",
                    "--data-urlencode", "--referer", "--range", "--resolve"))
    from guard.tools.interface import url_host

    urls = [a for a in p.pos] + p.values("--url")
    for u in urls:
        ctx.network(url_host(u.literal) if u.literal else None, "curl fetches it")
    if not urls:
        ctx.network(None, "curl with no literal URL")
    for v in p.values(*_CURL_WRITES):
        if v.text != "-":
            ctx.write(v, "curl writes it")
    if p.has("-O", "--remote-name", "--remote-name-all", "-J", "--remote-header-name"):
        ctx.unknown_write("curl -O writes a file named by the server or URL")
    for v in p.values("-T", "--upload-file", "-K", "--config"):
        ctx.read(v, "curl reads it")
    for v in p.values("-d", "--data", "--data-binary", "-F", "--form", "--data-urlencode"):
        if v.text and "@" in v.text:
            ctx.read(v.text.split("@", 1)[1], "curl uploads it")
    if p.dynamic:
        ctx.unknown_write("curl with a computed argument: it could be -o FILE")


@program("wget")
def _wget(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "OoaPiUetTwQlAR", (
        "--output-document", "--output-file", "--append-output", "--directory-prefix",
        "--input-file", "--user-agent", "--execute", "--tries", "--timeout", "--wait", "--quota"))
    from guard.tools.interface import url_host

    for u in p.pos:
        ctx.network(url_host(u.literal) if u.literal else None, "wget fetches it")
    outs = p.values("-O", "--output-document")
    for v in outs:
        if v.text != "-":
            ctx.write(v, "wget writes it")
    for v in p.values("-o", "--output-file", "-a", "--append-output"):
        ctx.write(v, "wget logs into it")
    if not outs and not p.has("--spider"):
        ctx.unknown_write("wget saves downloads under names taken from the URL")
    if p.has("-e", "--execute"):
        ctx.unknown_exec("wget -e runs wgetrc commands")


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

