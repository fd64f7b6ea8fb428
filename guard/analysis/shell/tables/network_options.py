"""Network programs: the options guard understands (exact names; the rest is unknown).

curl and wget accept abbreviated long options; these tables are subsets, so they
are matched exactly (``abbrev=False``): any other option makes the command one
that may write anything.
"""

from __future__ import annotations

from guard.analysis.shell.option_parser import Spec

CURL = Spec(
    "sSLfiIvkGgNq#",
    "--silent --show-error --location --fail --fail-with-body --include --head --verbose"
    " --insecure --get --globoff --no-buffer --compressed --http1.1 --http2 --ipv4 --ipv6"
    " -4 -6 --no-progress-meter --progress-bar --location-trusted --no-keepalive"
    " -H|--header= -X|--request= -A|--user-agent= -m|--max-time= --connect-timeout="
    " --retry= --retry-delay= --retry-max-time= -w|--write-out= -e|--referer= -u|--user="
    " -d|--data= --data-raw= --data-binary= --data-urlencode= --json= -F|--form= --form-string="
    " -x|--proxy= --noproxy= -r|--range= -b|--cookie= --resolve= --cacert=@read --cert=@read"
    " --key=@read --url= -z|--time-cond= --max-filesize= --limit-rate= -Y|--speed-limit="
    " -y|--speed-time= -T|--upload-file=@read"
    " -o|--output=@write -D|--dump-header=@write -c|--cookie-jar=@write --trace=@write"
    " --trace-ascii=@write --stderr=@write --libcurl=@write --etag-save=@write --hsts=@write"
    " --alt-svc=@write --output-dir=@write -O|--remote-name --remote-name-all"
    " -J|--remote-header-name -K|--config=@exec -V|--version -h|--help=?",
    abbrev=False)
WGET = Spec(
    "qvdNcrkpS46",
    "--quiet --verbose --no-verbose --debug --timestamping --continue --recursive"
    " --convert-links --page-requisites --server-response --spider --no-check-certificate"
    " --inet4-only --inet6-only --no-clobber --no-parent --no-directories"
    " -t|--tries= -T|--timeout= -w|--wait= -Q|--quota= -U|--user-agent= --header="
    " --user= --password= -l|--level= -A|--accept= -R|--reject= --max-redirect="
    " -O|--output-document=@write -o|--output-file=@write -a|--append-output=@write"
    " -P|--directory-prefix=@write -i|--input-file=@read -e|--execute=@exec"
    " --post-data= --post-file=@read --body-data= --method= --show-progress"
    " --progress= --no-cache --no-cookies --load-cookies=@read --save-cookies=@write"
    " -V|--version -h|--help",
    abbrev=False)

#: Subcommands that change something beyond this machine, and what they change: the
#: reason a plan-mode refusal gives (a network effect that changes a remote). The first
#: operand (and for a few programs the second: ``state push``) picks the entry.
REMOTE_CHANGES: dict[str, dict[str, str]] = {
    "npm": {
        "publish": "uploads a package to the npm registry",
        "unpublish": "removes a package from the npm registry",
        "deprecate": "marks a package deprecated on the npm registry",
        "dist-tag": "moves a package's tags on the npm registry",
        "owner": "changes a package's owners on the npm registry",
        "access": "changes a package's access on the npm registry",
    },
    "pnpm": {"publish": "uploads a package to the npm registry"},
    "yarn": {"publish": "uploads a package to the npm registry"},
    "cargo": {
        "publish": "uploads a crate to crates.io",
        "yank": "yanks a crate version on crates.io",
        "owner": "changes a crate's owners on crates.io",
    },
    "gem": {"push": "uploads a gem to rubygems.org", "yank": "yanks a gem on rubygems.org"},
    "poetry": {"publish": "uploads a package to a package index"},
    "uv": {"publish": "uploads a package to a package index"},
    "docker": {"push": "uploads an image to a registry"},
    "podman": {"push": "uploads an image to a registry"},
    "kubectl": {
        verb: "changes objects in the cluster through its API"
        for verb in ("apply", "create", "delete", "edit", "patch", "replace", "scale",
                     "rollout", "set", "label", "annotate", "expose", "run", "autoscale",
                     "drain", "cordon", "uncordon", "taint", "cp", "exec", "attach")
    },
    "terraform": {
        "apply": "changes real infrastructure",
        "destroy": "destroys real infrastructure",
        "import": "writes the remote state",
        "taint": "writes the remote state",
        "untaint": "writes the remote state",
        "refresh": "writes the remote state",
        "force-unlock": "unlocks the remote state",
        "state push": "overwrites the remote state",
        "state rm": "writes the remote state",
        "state mv": "writes the remote state",
        "workspace new": "creates a workspace in the remote state",
        "workspace delete": "deletes a workspace from the remote state",
    },
}

#: gh: verbs that only read from GitHub (in any command group; ``gh api`` is decided by
#: its method), and verbs that change something there.
GH_READ_VERBS = frozenset({"view", "list", "status", "diff", "checks", "watch", "download"})
GH_CHANGE_VERBS = frozenset({
    "merge", "create", "delete", "edit", "close", "reopen", "comment", "review", "ready",
    "set", "upload", "run", "rerun", "cancel", "fork", "archive", "unarchive", "rename",
    "enable", "disable", "lock", "unlock", "transfer", "pin", "unpin", "develop", "sync",
    "add", "remove", "approve",
})  # fmt: skip
#: Methods that only read (HTTP); any other one may change the server.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

#: Options before the subcommand that take a separate value (skipped to find it).
GLOBAL_VALUE_OPTIONS: dict[str, frozenset[str]] = {
    "kubectl": frozenset({"-n", "--namespace", "--context", "--kubeconfig", "-s", "--server",
                          "--cluster", "--user", "--token", "--as", "--as-group",
                          "--request-timeout", "-v"}),
    "docker": frozenset({"-H", "--host", "-c", "--context", "--config", "-l", "--log-level"}),
    "podman": frozenset({"--url", "-c", "--connection", "--log-level", "--root", "--runroot"}),
    "gh": frozenset({"-R", "--repo", "--hostname"}),
    "npm": frozenset({"--prefix", "--registry", "-w", "--workspace", "--userconfig"}),
}
