"""File programs: every option of the programs that read files (and of those that write).

``READERS``: programs that are read-only unless an option with a role says
otherwise; ``operands`` says what their operands are ("read": files read, "none":
data). ``WRITERS``: the options of programs whose handlers write their operands.
"""

from __future__ import annotations

from guard.analysis.shell.option_parser import Spec

_SUMS = ("-b|--binary -c|--check --tag -t|--text -z|--zero --ignore-missing --quiet --status"
         " --strict -w|--warn --help --version")
_DIGITS = "0123456789"

#: name -> (spec, what the operands are)
READERS: dict[str, tuple[Spec, str]] = {
    "cat": (Spec("AbeEnstTuv", "--show-all --number-nonblank --show-ends --number --squeeze-blank"
                 " --show-tabs --show-nonprinting --help --version"), "read"),
    "tac": (Spec("", "-b|--before -r|--regex -s|--separator= --help --version"), "read"),
    "rev": (Spec("", "-h|--help -V|--version"), "read"),
    "wc": (Spec("", "-c|--bytes -m|--chars -l|--lines --files0-from=@read -L|--max-line-length"
                " -w|--words --help --version"), "read"),
    "md5sum": (Spec("", _SUMS), "read"),
    "sha1sum": (Spec("", _SUMS), "read"),
    "sha224sum": (Spec("", _SUMS), "read"),
    "sha256sum": (Spec("", _SUMS), "read"),
    "sha384sum": (Spec("", _SUMS), "read"),
    "sha512sum": (Spec("", _SUMS), "read"),
    "b2sum": (Spec("", "-l|--length= " + _SUMS), "read"),
    "cksum": (Spec("", "-a|--algorithm= -c|--check -l|--length= --tag --untagged -z|--zero"
                   " --ignore-missing --quiet --status --strict -w|--warn --debug --help"
                   " --version"), "read"),
    "sum": (Spec("r", "-s|--sysv --help --version"), "read"),
    "base32": (Spec("", "-d|--decode -i|--ignore-garbage -w|--wrap= --help --version"), "read"),
    "base64": (Spec("", "-d|--decode -i|--ignore-garbage -w|--wrap= --help --version"), "read"),
    "expand": (Spec("", "-i|--initial -t|--tabs= --help --version "
                    + " ".join(f"-{d}=?" for d in _DIGITS)), "read"),
    "unexpand": (Spec("", "-a|--all --first-only -t|--tabs= --help --version "
                      + " ".join(f"-{d}=?" for d in _DIGITS)), "read"),
    "fmt": (Spec(_DIGITS, "-c|--crown-margin -p|--prefix= -s|--split-only -t|--tagged-paragraph"
                 " -u|--uniform-spacing -w|--width= -g|--goal= --help --version"), "read"),
    "realpath": (Spec("", "-e|--canonicalize-existing -m|--canonicalize-missing -L|--logical"
                      " -P|--physical -q|--quiet --relative-to= --relative-base="
                      " -s|--strip|--no-symlinks -z|--zero --help --version"), "read"),
    "readlink": (Spec("", "-f|--canonicalize -e|--canonicalize-existing -m|--canonicalize-missing"
                      " -n|--no-newline -q|--quiet -s|--silent -v|--verbose -z|--zero --help"
                      " --version"), "read"),
    "stat": (Spec("", "-L|--dereference -f|--file-system --cached= -c|--format= --printf="
                  " -t|--terse --help --version"), "read"),
    "du": (Spec("Hkm", "-0|--null -a|--all --apparent-size -B|--block-size= -b|--bytes -c|--total"
                " -D|--dereference-args -d|--max-depth= --files0-from=@read -h|--human-readable"
                " --inodes -L|--dereference -l|--count-links -P|--no-dereference"
                " -S|--separate-dirs --si -s|--summarize -t|--threshold= --time=?"
                " --time-style= -X|--exclude-from=@read --exclude= -x|--one-file-system --help"
                " --version"), "read"),
    "df": (Spec("kv", "-a|--all -B|--block-size= -h|--human-readable -H|--si -i|--inodes -l|--local"
                " --no-sync --output=? -P|--portability --sync --total -t|--type="
                " -T|--print-type -x|--exclude-type= --help --version"), "read"),
    "cmp": (Spec("", "-b|--print-bytes -i|--ignore-initial= -l|--verbose -n|--bytes="
                 " -s|--quiet|--silent --help -v|--version"), "read"),
    "comm": (Spec("123", "--check-order --nocheck-order --output-delimiter= --total"
                  " -z|--zero-terminated --help --version"), "read"),
    "ls": (Spec("cCfglmopStuUvxX1", "-a|--all -A|--almost-all --author -b|--escape --block-size="
                " -B|--ignore-backups --color=? -d|--directory -D|--dired -F|--classify=?"
                " --file-type --format= --full-time --group-directories-first -G|--no-group"
                " -h|--human-readable --si -H|--dereference-command-line"
                " --dereference-command-line-symlink-to-dir --hide= --hyperlink=?"
                " --indicator-style= -i|--inode -I|--ignore= -k|--kibibytes -L|--dereference"
                " -n|--numeric-uid-gid -N|--literal -q|--hide-control-chars --show-control-chars"
                " -Q|--quote-name --quoting-style= -r|--reverse -R|--recursive -s|--size --sort="
                " --time= --time-style= -T|--tabsize= -w|--width= -Z|--context --zero --help"
                " --version"), "read"),
    "head": (Spec(_DIGITS, "-c|--bytes= -n|--lines= -q|--quiet|--silent -v|--verbose"
                  " -z|--zero-terminated --help --version"), "read"),
    "tail": (Spec("F" + _DIGITS, "-c|--bytes= -f|--follow=? -n|--lines= --max-unchanged-stats="
                  " --pid= -q|--quiet|--silent --retry -s|--sleep-interval= -v|--verbose"
                  " -z|--zero-terminated --help --version"), "read"),
    "nl": (Spec("", "-b|--body-numbering= -d|--section-delimiter= -f|--footer-numbering="
                " -h|--header-numbering= -i|--line-increment= -l|--join-blank-lines="
                " -n|--number-format= -p|--no-renumber -s|--number-separator="
                " -v|--starting-line-number= -w|--number-width= --help --version"), "read"),
    "fold": (Spec(_DIGITS, "-b|--bytes -s|--spaces -w|--width= --help --version"), "read"),
    "cut": (Spec("n", "-b|--bytes= -c|--characters= -d|--delimiter= -f|--fields= --complement"
                 " -s|--only-delimited --output-delimiter= -z|--zero-terminated --help"
                 " --version"), "read"),
    "paste": (Spec("", "-d|--delimiters= -s|--serial -z|--zero-terminated --help --version"),
              "read"),
    "join": (Spec("", "-a= -e= -i|--ignore-case -j= -o= -t= -v= -1= -2= --check-order"
                  " --nocheck-order --header -z|--zero-terminated --help --version"), "read"),
    "od": (Spec("abcdfilosxBDeFHILOX", "-A|--address-radix= -j|--skip-bytes= -N|--read-bytes="
                " -S|--strings=? -t|--format= -v|--output-duplicates -w|--width=?"
                " --traditional --endian= --help --version"), "read"),
    "diff": (Spec("", "--normal -q|--brief -s|--report-identical-files -c -C|--context=? -u"
                  " -U|--unified=? -e|--ed -n|--rcs -y|--side-by-side -W|--width= --left-column"
                  " --suppress-common-lines -p|--show-c-function -F|--show-function-line="
                  " --label= -t|--expand-tabs -T|--initial-tab --tabsize= --suppress-blank-empty"
                  " -l|--paginate -r|--recursive --no-dereference -N|--new-file"
                  " --unidirectional-new-file --ignore-file-name-case --no-ignore-file-name-case"
                  " -x|--exclude= -X|--exclude-from=@read -S|--starting-file= --from-file=@read"
                  " --to-file=@read -i|--ignore-case -E|--ignore-tab-expansion"
                  " -Z|--ignore-trailing-space -b|--ignore-space-change -w|--ignore-all-space"
                  " -B|--ignore-blank-lines -I|--ignore-matching-lines= -a|--text"
                  " --strip-trailing-cr -D|--ifdef= --old-group-format= --new-group-format="
                  " --changed-group-format= --unchanged-group-format= --line-format="
                  " --old-line-format= --new-line-format= --unchanged-line-format= -d|--minimal"
                  " --horizon-lines= --speed-large-files --color=? --palette= --help"
                  " -v|--version"), "read"),
    "diff3": (Spec("Xi", "-A|--show-all -e|--ed -E|--show-overlap -3|--easy-only -x|--overlap-only"
                   " -m|--merge -a|--text --strip-trailing-cr -T|--initial-tab"
                   " --diff-program=@exec -L|--label= --help -v|--version"), "read"),
    "sdiff": (Spec("", "-o|--output=@write -i|--ignore-case -E|--ignore-tab-expansion"
                   " -Z|--ignore-trailing-space -b|--ignore-space-change -W|--ignore-all-space"
                   " -B|--ignore-blank-lines -I|--ignore-matching-lines= --strip-trailing-cr"
                   " -a|--text -w|--width= -l|--left-column -s|--suppress-common-lines"
                   " -t|--expand-tabs --tabsize= -d|--minimal -H|--speed-large-files"
                   " --diff-program=@exec --help -v|--version"), "read"),
    "look": (Spec("", "-a|--alternative -d|--alphanum -f|--ignore-case -t|--terminate="
                  " -h|--help -V|--version"), "look"),
    "numfmt": (Spec("", "--debug -d|--delimiter= --field= --format= --from= --from-unit="
                    " --grouping --header=? --invalid= --padding= --round= --suffix= --to="
                    " --to-unit= -z|--zero-terminated --help --version"), "none"),
    "shuf": (Spec("", "-e|--echo -i|--input-range= -n|--head-count= -o|--output=@write"
                  " --random-source=@read -r|--repeat -z|--zero-terminated --help --version"),
             "shuf"),
    "tsort": (Spec("", "--help --version"), "read"),
    "sort": (Spec("", "-b|--ignore-leading-blanks -d|--dictionary-order -f|--ignore-case"
                  " -g|--general-numeric-sort -i|--ignore-nonprinting -M|--month-sort"
                  " -h|--human-numeric-sort -n|--numeric-sort -R|--random-sort"
                  " --random-source=@read -r|--reverse --sort= -V|--version-sort --batch-size="
                  " -c|--check=? -C --compress-program=@exec --debug --files0-from=@read"
                  " -k|--key= -m|--merge -o|--output=@write -s|--stable -S|--buffer-size="
                  " -t|--field-separator= -T|--temporary-directory=@write --parallel="
                  " -u|--unique -z|--zero-terminated -y= --help --version"), "read"),
    "uniq": (Spec("D" + _DIGITS, "-c|--count -d|--repeated --all-repeated=? -f|--skip-fields="
                  " --group=? -i|--ignore-case -s|--skip-chars= -u|--unique"
                  " -z|--zero-terminated -w|--check-chars= --help --version"), "uniq"),
    "file": (Spec("", "--help -v|--version -m|--magic-file=@read -z|--uncompress"
                  " -Z|--uncompress-noreport -b|--brief -c|--checking-printout -e|--exclude="
                  " --exclude-quiet= -f|--files-from=@read -F|--separator= -i|--mime --apple"
                  " --extension --mime-type --mime-encoding -k|--keep-going -l|--list"
                  " -L|--dereference -h|--no-dereference -n|--no-buffer -N|--no-pad -0|--print0"
                  " -p|--preserve-date@state -P|--parameter= -r|--raw -s|--special-files"
                  " -S|--no-sandbox -C|--compile -d|--debug"), "file"),
    "namei": (Spec("", "-x|--mountpoints -m|--modes -o|--owners -l|--long -n|--nosymlinks"
                   " -v|--vertical -h|--help -V|--version"), "read"),
    "basename": (Spec("", "-a|--multiple -s|--suffix= -z|--zero --help --version"), "none"),
    "dirname": (Spec("", "-z|--zero --help --version"), "none"),
    "seq": (Spec(_DIGITS, "-f|--format= -s|--separator= -w|--equal-width --help --version"),
            "none"),
    "tr": (Spec("", "-c|-C|--complement -d|--delete -s|--squeeze-repeats -t|--truncate-set1"
                " --help --version"), "none"),
    "id": (Spec("a", "-Z|--context -g|--group -G|--groups -n|--name -r|--real -u|--user"
                " -z|--zero --help --version"), "none"),
    "uname": (Spec("", "-a|--all -s|--kernel-name -n|--nodename -r|--kernel-release"
                   " -v|--kernel-version -m|--machine -p|--processor -i|--hardware-platform"
                   " -o|--operating-system --help --version"), "none"),
    "printenv": (Spec("", "-0|--null --help --version"), "none"),
    "nproc": (Spec("", "--all --ignore= --help --version"), "none"),
    "whoami": (Spec("", "--help --version"), "none"),
    "groups": (Spec("", "--help --version"), "none"),
    "logname": (Spec("", "--help --version"), "none"),
    "users": (Spec("", "--help --version"), "none"),
    "arch": (Spec("", "--help --version"), "none"),
    "tty": (Spec("", "-s|--silent|--quiet --help --version"), "none"),
    "sleep": (Spec("", "--help --version"), "none"),
    "factor": (Spec("", "--help --version"), "none"),
    "yes": (Spec("", "--help --version"), "none"),
    "expr": (Spec("", "--help --version", permute=False), "none"),
    "uptime": (Spec("", "-p|--pretty -h|--help -s|--since -V|--version"), "none"),
    "free": (Spec("bkmglhwV", "--bytes --kilo --mega --giga --tera --peta --kibi --mebi --gibi"
                  " --tebi --pebi --human --si --lohi --wide --committed -c|--count="
                  " -s|--seconds= -t|--total --help --version"), "none"),
    "getconf": (Spec("a", "-v="), "none"),
    "lscpu": (Spec("", "-a|--all -b|--online -B|--bytes -C|--caches=? -c|--offline -J|--json"
                   " -e|--extended=? -p|--parse=? -s|--sysroot=@read -x|--hex -y|--physical"
                   " --output-all -h|--help -V|--version"), "none"),
    "pwd": (Spec("", "-L|--logical -P|--physical --help --version"), "none"),
    # system state: an operand sets the clock or the host name
    "date": (Spec("", "-d|--date= --debug -f|--file=@read -I|--iso-8601=? --resolution"
                  " -R|--rfc-email --rfc-3339= -r|--reference=@read -s|--set=@state"
                  " -u|--utc|--universal --help --version"), "date"),
    "hostname": (Spec("", "-a|--alias -A|--all-fqdns -b|--boot@state -d|--domain"
                      " -f|--fqdn|--long -F|--file=@state -i|--ip-address"
                      " -I|--all-ip-addresses -s|--short -y|--yp|--nis -h|--help"
                      " -V|--version"), "sets"),
}

#: options of programs that write or delete their operands (their handlers name the effects)
WRITERS: dict[str, Spec] = {
    "cp": Spec("bdHpZ", "-a|--archive --attributes-only --backup=? --copy-contents -f|--force"
               " -i|--interactive -l|--link -L|--dereference -n|--no-clobber -P|--no-dereference"
               " --preserve=? --no-preserve= --parents -R|-r|--recursive --reflink=?"
               " --remove-destination --sparse= --strip-trailing-slashes -s|--symbolic-link"
               " -S|--suffix= -t|--target-directory= -T|--no-target-directory -u|--update=?"
               " -v|--verbose -x|--one-file-system --context=? --help --version"),
    "mv": Spec("b", "--backup=? -f|--force -i|--interactive -n|--no-clobber"
               " --strip-trailing-slashes -S|--suffix= -t|--target-directory="
               " -T|--no-target-directory -u|--update=? -v|--verbose -Z|--context --help"
               " --version"),
    "ln": Spec("b", "--backup=? -d|-F|--directory -f|--force -i|--interactive -L|--logical"
               " -n|--no-dereference -P|--physical -r|--relative -s|--symbolic -S|--suffix="
               " -t|--target-directory= -T|--no-target-directory -v|--verbose --help --version"),
    "install": Spec("bcDZ", "--backup=? -C|--compare -d|--directory -g|--group= -m|--mode="
                    " -o|--owner= -p|--preserve-timestamps -s|--strip --strip-program=@exec"
                    " -S|--suffix= -t|--target-directory= -T|--no-target-directory -v|--verbose"
                    " --preserve-context --context=? --help --version"),
    "rm": Spec("iI", "-f|--force --interactive=? --one-file-system --no-preserve-root"
               " --preserve-root=? -r|-R|--recursive -d|--dir -v|--verbose --help --version"),
    "rmdir": Spec("", "--ignore-fail-on-non-empty -p|--parents -v|--verbose --help --version"),
    "unlink": Spec("", "--help --version"),
    "mkdir": Spec("Z", "-m|--mode= -p|--parents -v|--verbose --context=? --help --version"),
    "touch": Spec("afm", "-c|--no-create -d|--date= -h|--no-dereference -r|--reference=@read -t="
                  " --time= --help --version"),
    "truncate": Spec("", "-c|--no-create -o|--io-blocks -r|--reference=@read -s|--size= --help"
                     " --version"),
    "tee": Spec("p", "-a|--append -i|--ignore-interrupts --output-error=? --help --version"),
    "shred": Spec("u", "-f|--force -n|--iterations= --random-source=@read -s|--size= --remove=?"
                  " -v|--verbose -x|--exact -z|--zero --help --version"),
    "mkfifo": Spec("Z", "-m|--mode= --context=? --help --version"),
    "mknod": Spec("Z", "-m|--mode= --context=? --help --version"),
}

#: programs with handlers of their own (operands that are patterns, scripts, commands)
GREP = Spec("EFGPiywxzsvVbnHhoqaIrRLlcTZUu0123456789",
            "-e|--regexp= -f|--file=@read --no-ignore-case --ignore-case --word-regexp"
            " --line-regexp --null-data --no-messages --invert-match --version --help"
            " -m|--max-count= --byte-offset --line-number --line-buffered --with-filename"
            " --no-filename --label= --only-matching --quiet --silent --binary-files= --text"
            " -d|--directories= -D|--devices= --recursive --dereference-recursive --include="
            " --exclude= --exclude-from=@read --exclude-dir= --files-without-match"
            " --files-with-matches --count --initial-tab --null -B|--before-context="
            " -A|--after-context= -C|--context= --group-separator= --no-group-separator"
            " --color=? --colour=? --binary --extended-regexp --fixed-strings --basic-regexp"
            " --perl-regexp -X=")
#: ripgrep parses options without abbreviations: this subset is exact, the rest is unknown
RG = Spec("cFHhilLnNopPqsSuUvVwxa0b", "-A= -B= -C= -e= -E= -f=@read -g= -j= -M= -m= -r= -t="
          " -T= -d= --files --hidden --no-ignore --glob= --iglob= --type= --type-not="
          " --max-count= --max-depth= --context= --after-context= --before-context= --json"
          " --count --files-with-matches --files-without-match --line-number --no-heading"
          " --heading --color= --sort= --sortr= --fixed-strings --ignore-case --smart-case"
          " --word-regexp --follow --stats --trim --vimgrep --column --no-messages --type-list"
          " --null --text --multiline --regexp= --file=@read --replace= --no-filename"
          " --with-filename --only-matching --invert-match --quiet --unrestricted"
          " --max-columns= --threads= --encoding= --pre=@exec --pre-glob= -z|--search-zip@exec"
          " --help --version", abbrev=False)
#: jq 1.6 parses options itself: exact long names, bundled short flags
JQ = Spec("", "-s|--slurp -r|--raw-output -j|--join-output -a|--ascii-output -c|--compact-output"
          " -C|--color-output -M|--monochrome-output -S|--sort-keys -R|--raw-input"
          " -n|--null-input -e|--exit-status -f|--from-file -L=@read --tab --indent= --seq"
          " --stream --unbuffered --arg=2 --argjson=2 --slurpfile=2@read --rawfile=2@read"
          " --argfile=2@read --args --jsonargs -h|--help -V|--version --debug-dump-disasm"
          " --debug-trace", abbrev=False)
SED = Spec("", "-n|--quiet|--silent --debug --follow-symlinks -i|--in-place=? -l|--line-length="
           " --posix -E|-r|--regexp-extended -s|--separate --sandbox -u|--unbuffered"
           " -z|--null-data --help --version -e|--expression= -f|--file=@read -b|--binary")

#: find: options before the roots, then the primaries of the expression with their arity
FIND_FRONT = {"-H": 0, "-L": 0, "-P": 0, "-D": 1, "-O": 1}
FIND_PRIMARIES: dict[str, tuple[int, str]] = {
    **{p: (0, "") for p in (
        "-d", "-depth", "-follow", "-help", "--help", "-ignore_readdir_race", "-mount",
        "-noignore_readdir_race", "-noleaf", "-version", "--version", "-warn", "-nowarn",
        "-xdev", "-daystart", "-empty", "-executable", "-false", "-nogroup", "-nouser",
        "-readable", "-true", "-writable", "-ls", "-print", "-print0", "-prune", "-quit",
        "(", ")", "!", "-not", "-a", "-and", "-o", "-or", ",")},
    **{p: (1, "") for p in (
        "-maxdepth", "-mindepth", "-regextype", "-amin", "-atime", "-cmin", "-context",
        "-ctime", "-fstype", "-gid", "-group", "-ilname", "-iname", "-inum", "-ipath",
        "-iregex", "-iwholename", "-links", "-lname", "-mmin", "-mtime", "-name", "-path",
        "-perm", "-regex", "-size", "-type", "-uid", "-used", "-user", "-wholename", "-xtype",
        "-printf")},
    **{p: (1, "read") for p in ("-anewer", "-cnewer", "-newer", "-samefile", "-files0-from")},
    **{p: (1, "write") for p in ("-fls", "-fprint", "-fprint0")},
    "-fprintf": (2, "write"),
    "-delete": (0, "delete"),
    **{p: (-1, "exec") for p in ("-exec", "-execdir", "-ok", "-okdir")},
}

#: tree and xxd parse their options themselves (bundling and attached values differ
#: between versions): only separate words, exactly as listed, are understood
TREE = Spec("", "-a -d -l -f -x -p -s -u -g -D -F -q -N -Q -r -t -c -U -v -C -n -A -S -h -i -J"
            " -X --inodes --device --noreport --dirsfirst --gitignore --prune --matchdirs --du"
            " --si --help --version -L= -P= -I= --charset= --filelimit= --timefmt= --sort="
            " -o=@write", exact=True)
XXD = Spec("", "-a -autoskip -b -bits -C -capitalize -E -EBCDIC -e -h -help -i -include -ps"
           " -postscript -plain -r -revert -d -u -uppercase -v -version -c= -cols= -g="
           " -groupsize= -l= -len= -n= -name= -o= -offset= -s= -seek=", exact=True)
#: chmod/chown/chgrp: modes such as -x or -rw look like options and are modes
CHMOD = Spec("", "-c|--changes -f|--silent|--quiet -v|--verbose --no-preserve-root"
             " --preserve-root --reference=@read -R|--recursive --help --version")
CHOWN = Spec("HLP", "-c|--changes -f|--silent|--quiet -v|--verbose --dereference"
             " -h|--no-dereference --from= --no-preserve-root --preserve-root --reference=@read"
             " -R|--recursive --help --version")
