"""Network programs: the options guard understands (exact names; the rest is unknown).

curl and wget accept abbreviated long options; these tables are subsets, so they
are matched exactly (``abbrev=False``): any other option makes the command one
that may write anything.
"""

from __future__ import annotations

from guard.tools.shell.options import Spec

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
