"""Kernel confinement for ``guard run`` and for each plan-mode shell command.

* :mod:`guard.sandbox.landlock`: Landlock through ctypes (no policy logic; the one ABI probe).
* :mod:`guard.sandbox.seccomp`: the capability drop and the seccomp filter for system state.
* :mod:`guard.sandbox.helper`: the helper that applies both and execs a command (stdlib
  only, run as a script; its command line :mod:`guard.sandbox.helper_args`, the directories
  it checks and removes :mod:`guard.sandbox.helper_dirs`).
* :mod:`guard.sandbox.confine`: the helper's argv for guard's process, and
  :func:`~guard.sandbox.confine.wrap_command` for hosts.
* :mod:`guard.sandbox.roots`: a policy's agent -> writable roots.
* :mod:`guard.sandbox.supervise`: ``guard run``'s process supervision (spawn, signals, wait).
* :mod:`guard.sandbox.confiner`: the gate's confiner of plan-mode shell calls on hosts that
  rewrite a call, and :func:`~guard.sandbox.confiner.confined_run` (``guard confine``);
  :mod:`guard.sandbox.direct`: on hosts that can only allow or refuse, guard's grammar or
  the confined form.

See docs/sandbox.md.
"""
