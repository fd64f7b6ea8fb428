"""Wrappers: programs that run another command, with every option they accept.

Wrappers stop at their first operand (the command to run), like their ``getopt``
strings (``+...``) do; ``positional`` operands come before the command
(``timeout DURATION COMMAND``). A ``cwd`` option changes the working directory of
the command it runs.
"""

from __future__ import annotations

from guard.analysis.shell.option_parser import Spec

#: name -> (spec, operands before the command)
WRAPPERS: dict[str, tuple[Spec, int]] = {
    "env": (Spec("", "-i|--ignore-environment -0|--null -u|--unset= -C|--chdir=@cwd"
                 " -S|--split-string= --block-signal=? --default-signal=? --ignore-signal=?"
                 " --list-signal-handling -v|--debug --help --version", permute=False), 0),
    "sudo": (Spec("", "-A|--askpass -b|--background -B|--bell -C|--close-from= -D|--chdir=@cwd"
                  " -E|--preserve-env=? -e|--edit@write -g|--group= -H|--set-home -h|--help"
                  " --host= -i|--login@exec -K|--remove-timestamp -k|--reset-timestamp"
                  " -l|--list -n|--non-interactive -P|--preserve-groups -p|--prompt="
                  " -R|--chroot=@exec -r|--role= -S|--stdin -s|--shell@exec -t|--type="
                  " -T|--command-timeout= -U|--other-user= -u|--user= -V|--version"
                  " -v|--validate", permute=False), 0),
    "doas": (Spec("nL", "-s@exec -u= -C=@read", permute=False), 0),
    "nice": (Spec("", "-n|--adjustment= --help --version "
                  + " ".join(f"-{d}=?" for d in "0123456789"), permute=False), 0),
    "ionice": (Spec("", "-c|--class= -n|--classdata= -p|--pid=@state -P|--pgid=@state"
                    " -u|--uid=@state -t|--ignore -h|--help -V|--version", permute=False), 0),
    "nohup": (Spec("", "--help --version", permute=False), 0),
    "setsid": (Spec("", "-c|--ctty -f|--fork -w|--wait -h|--help -V|--version",
                    permute=False), 0),
    "timeout": (Spec("", "--preserve-status --foreground -k|--kill-after= -s|--signal="
                     " -v|--verbose --help --version", permute=False), 1),
    # GNU time (/usr/bin/time); bash's `time` keyword takes only -p
    "time": (Spec("", "-a|--append -f|--format= -o|--output=@write -p|--portability -q|--quiet"
                  " -v|--verbose -V|--version --help", permute=False), 0),
    "stdbuf": (Spec("", "-i|--input= -o|--output= -e|--error= --help --version",
                    permute=False), 0),
    "chronic": (Spec("ev", permute=False), 0),
    "unbuffer": (Spec("p", permute=False), 0),
    "builtin": (Spec("", permute=False), 0),
    "coproc": (Spec("", permute=False), 0),
    "exec": (Spec("cl", "-a=", permute=False), 0),
}

COMMAND = Spec("pvV", permute=False)

XARGS = Spec("", "-0|--null -a|--arg-file=@read -d|--delimiter= -E= -e|--eof=? -I= -i|--replace=?"
             " -L|--max-lines= -l=? -n|--max-args= -o|--open-tty -P|--max-procs= -p|--interactive"
             " --process-slot-var= -r|--no-run-if-empty -s|--max-chars= --show-limits"
             " -t|--verbose -x|--exit --help --version", permute=False)
