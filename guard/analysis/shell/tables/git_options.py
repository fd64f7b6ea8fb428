"""git: the read-only subcommands and every option guard accepts for each.

git's own parsers accept abbreviated long options for many subcommands; these
tables are subsets, so they are matched **exactly** (``abbrev=False``): a word
that is not exactly a listed option is unknown, and the command not read-only.
Options that run programs are never listed (``--output`` is, as the write it is): ``--ext-diff``,
``-O``/``--open-files-in-pager``, ``--show-signature`` (runs gpg), ``--lost-found``,
``--textconv``/``--filters`` on cat-file. A value that is optional in git is
declared attached-only (``=?``): a separate word is then an operand, never hidden
as a value.
"""

from __future__ import annotations

from guard.analysis.shell.option_parser import Spec

_DIFF = (
    " -p|--patch -u -s|--no-patch -z -w|--ignore-all-space -b|--ignore-space-change"
    " -B=? -M=? -C=? -R -a|--text -U=? --unified=? --raw --stat=? --shortstat --numstat"
    " --name-only --name-status --summary --compact-summary --dirstat=? --patch-with-stat"
    " --patch-with-raw --minimal --histogram --patience --diff-algorithm=? --function-context"
    " --exit-code --quiet --check --full-index --binary --abbrev=? --no-abbrev --color=?"
    " --no-color --color-words=? --word-diff=? --word-diff-regex=? --color-moved=?"
    " --no-color-moved --ignore-blank-lines --ignore-cr-at-eol --ignore-space-at-eol"
    " --ignore-submodules=? --submodule=? --find-renames=? --find-copies=?"
    " --find-copies-harder --no-renames --diff-filter=? -S= -G= --pickaxe-all --pickaxe-regex"
    " --no-ext-diff --no-textconv --src-prefix=? --dst-prefix=? --no-prefix --line-prefix=?"
    " --relative=? --no-relative --ita-invisible-in-index --stat-width=? --stat-name-width=?"
    " --stat-count=? --indent-heuristic --no-indent-heuristic --inter-hunk-context=?"
    " --irreversible-delete -D --break-rewrites=? -l=? --cached --staged --merge-base"
    " --no-index --cc --combined-all-paths -c -m --diff-merges=? --no-diff-merges"
    " --remerge-diff --first-parent --output=@write"
)
_REVS = (
    " --oneline --graph --all --branches=? --tags=? --remotes=? --glob=? --exclude=?"
    " --decorate=? --no-decorate --decorate-refs=? --decorate-refs-exclude=? --format=?"
    " --pretty=? --abbrev-commit --no-abbrev-commit --since=? --until=? --after=? --before=?"
    " --author=? --committer=? --grep=? --invert-grep --all-match -i --regexp-ignore-case"
    " -E --extended-regexp -F --fixed-strings -P --perl-regexp --reverse -n= --max-count=?"
    " --skip=? --merges --no-merges --min-parents=? --max-parents=? --follow --date=?"
    " --relative-date --parents --children --left-right --cherry-pick --cherry-mark --cherry"
    " --boundary --full-diff --topo-order --date-order --author-date-order --source"
    " --full-history --simplify-by-decoration --simplify-merges --ancestry-path=? --dense"
    " --sparse --no-walk=? --do-walk --mailmap --no-mailmap --use-mailmap --notes=? --no-notes"
    " --encoding=? --expand-tabs=? --no-expand-tabs --log-size --walk-reflogs -g --show-pulls"
    " --not --ignore-missing --count --objects --objects-edge --in-commit-order --no-commit-id"
    " --root -r -t -L= --show-linear-break=? --stdin --single-worktree --bisect"
    " -0 -1 -2 -3 -4 -5 -6 -7 -8 -9"
)
_LOG = Spec("", _REVS + _DIFF, abbrev=False)

#: subcommand -> its options; only these subcommands can be read-only
#: ``git status`` refreshes the index (its stat cache) as a side effect, so it is no reader:
#: read-only only as ``git --no-optional-locks status`` (see :mod:`guard.analysis.shell.git`)
STATUS = Spec("", "-s|--short -b|--branch --porcelain=? --long -v|--verbose"
              " -u=? --untracked-files=? --ignored=? --ignore-submodules=? -z|--null"
              " --column=? --no-column --ahead-behind --no-ahead-behind --renames"
              " --no-renames --find-renames=? --show-stash", abbrev=False)

#: subcommands that only read, whatever their options in the table
READ: dict[str, Spec] = {
    "log": _LOG, "show": _LOG, "whatchanged": _LOG, "rev-list": _LOG, "diff": _LOG,
    "diff-tree": _LOG, "diff-files": _LOG, "diff-index": _LOG,
    "shortlog": Spec("", _REVS + " -s|--summary -e|--email -c --group=? -w=?"
                     " --numbered", abbrev=False),
    "blame": Spec("", "-b -l -t -s -e|--show-email -p|--porcelain --line-porcelain"
                  " --incremental --root --show-stats -f|--show-name -n|--show-number -w"
                  " -M=? -C=? -L= --date=? --abbrev=? --reverse=? --first-parent"
                  " --contents=@read --ignore-rev=? --ignore-revs-file=@read --color-lines"
                  " --color-by-age --progress --no-progress --minimal -c", abbrev=False),
    "grep": Spec("", "-i|--ignore-case -I -w|--word-regexp -v|--invert-match -h -H"
                 " -E|--extended-regexp -G|--basic-regexp -F|--fixed-strings -P|--perl-regexp"
                 " -n|--line-number -l|--files-with-matches|--name-only -L|--files-without-match"
                 " -c|--count -o|--only-matching -q|--quiet -z|--null -a|--text -r -p"
                 " --show-function -W|--function-context -e= -f=@read -A= -B= -C= -m="
                 " --cached --untracked --no-index --exclude-standard --no-exclude-standard"
                 " --recurse-submodules --full-name --column --color=? --no-color --break"
                 " --heading --all-match --and --or --not --max-depth=? --threads=?"
                 " --max-count=? --context=? --after-context=? --before-context=?"
                 " -0 -1 -2 -3 -4 -5 -6 -7 -8 -9", abbrev=False),
    "ls-files": Spec("", "-c|--cached -d|--deleted -m|--modified -o|--others -i|--ignored"
                     " -s|--stage -u|--unmerged -k|--killed -z -t -v -f --directory"
                     " --no-empty-directory --exclude=? -x= --exclude-from=@read -X=@read"
                     " --exclude-per-directory=? --exclude-standard --error-unmatch --full-name"
                     " --recurse-submodules --abbrev=? --eol --deduplicate --format=? --debug"
                     " --sparse --with-tree=?", abbrev=False),
    "ls-tree": Spec("", "-d -r -t -l|--long -z --name-only --name-status --object-only"
                    " --full-name --full-tree --abbrev=? --format=?", abbrev=False),
    "cat-file": Spec("", "-t -s -e -p -z -Z --batch=? --batch-check=? --batch-command=?"
                     " --batch-all-objects --follow-symlinks --buffer --unordered --use-mailmap"
                     " --no-use-mailmap --allow-unknown-type", abbrev=False),
    "describe": Spec("", "--all --tags --contains --abbrev=? --candidates=? --exact-match"
                     " --debug --long --match=? --exclude=? --always --first-parent",
                     abbrev=False),
    "merge-base": Spec("", "-a|--all --octopus --independent --is-ancestor --fork-point",
                       abbrev=False),
    "name-rev": Spec("", "--tags --refs=? --exclude=? --all --stdin --annotate-stdin"
                     " --name-only --no-undefined --always", abbrev=False),
    "for-each-ref": Spec("", "--count=? -s|--shell --perl --python --tcl --sort=? --format=?"
                         " --color=? --points-at=? --merged=? --no-merged=? --contains=?"
                         " --no-contains=? --ignore-case", abbrev=False),
    "show-ref": Spec("", "--head --verify --hash=? -s --abbrev=? --tags --heads"
                     " -d|--dereference -q|--quiet", abbrev=False),
    "count-objects": Spec("", "-v|--verbose -H|--human-readable", abbrev=False),
    "check-ignore": Spec("", "-q|--quiet -v|--verbose -n|--non-matching -z --stdin"
                         " --no-index", abbrev=False),
    "check-attr": Spec("", "-a|--all --cached --stdin -z --source=?", abbrev=False),
    "var": Spec("", "-l", abbrev=False),
    "cherry": Spec("", "-v --abbrev=?", abbrev=False),
    "version": Spec("", "--build-options", abbrev=False),
    "fsck": Spec("", "--unreachable --dangling --no-dangling --root --tags --cache"
                 " --no-reflogs --full --no-full --connectivity-only --strict --verbose"
                 " --progress --no-progress --name-objects", abbrev=False),
    "range-diff": Spec("", "--creation-factor=? --no-dual-color --left-only --right-only"
                       + _DIFF, abbrev=False),
}
#: subcommands that list or write depending on their words (decided by the handler)
BRANCH = Spec("", "-a|--all -r|--remotes -v|--verbose -l|--list --show-current --no-color"
              " --color=? --merged=? --no-merged=? --contains=? --no-contains=? --sort=?"
              " --format=? --points-at=? --column=? --no-column -i|--ignore-case --abbrev=?"
              " --no-abbrev", abbrev=False)
TAG = Spec("", "-l|--list -n=? --sort=? --contains=? --no-contains=? --merged=? --no-merged=?"
           " --points-at=? --format=? --column=? --no-column -i|--ignore-case --color=?",
           abbrev=False)
REMOTE = Spec("", "-v|--verbose", permute=False, abbrev=False)
REMOTE_READ: dict[str, Spec] = {
    "show": Spec("", "-n", abbrev=False),
    "get-url": Spec("", "--push --all", abbrev=False),
}
CONFIG_READ = Spec("", "--get --get-all --get-regexp --get-urlmatch -l|--list --show-origin"
                   " --show-scope --name-only -z|--null --type=? --bool --int --bool-or-int"
                   " --path --expiry-date --global --system --local --worktree -f|--file=@read"
                   " --blob=? --default=? --includes --no-includes", abbrev=False)
CONFIG_ACTIONS = ("--get", "--get-all", "--get-regexp", "--get-urlmatch", "-l")
WORKTREE_LIST = Spec("", "--porcelain -v|--verbose -z --expire=?", abbrev=False)
#: options before the subcommand that change nothing guard relies on
GLOBAL_FLAGS = frozenset({"--no-pager", "-P", "--no-replace-objects", "--literal-pathspecs",
                          "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs",
                          "--no-optional-locks"})
