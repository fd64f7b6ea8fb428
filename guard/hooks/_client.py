"""The hook command hosts run: ``python -I .../guard/hooks/_client.py HOST [options]``.

A launcher only: it loads :mod:`guard.hooks.hookclient` from the file
next to it through the byte-code cache (a script given on the command line is
compiled on every run; a module is not) and runs it. Any failure, including a
missing or broken client, exits 2, which hosts treat as a block.
"""

# Lazy imports: import machinery inside _run's try: on the hook path a failure exits 2.

import os
import sys


def _run() -> int:
    try:
        import _frozen_importlib as bootstrap
        import _frozen_importlib_external as external

        path = os.path.join(os.path.dirname(os.path.realpath(__file__)), "hookclient.py")
        loader = external.SourceFileLoader("guard_hookclient", path)
        spec = bootstrap.spec_from_loader(loader.name, loader)
        if spec is None:
            raise ImportError(f"cannot load {path}")
        module = bootstrap.module_from_spec(spec)
        loader.exec_module(module)
        code: int = module.main(sys.argv[1:])
        return code
    except BaseException as exc:  # fail closed, whatever happened
        try:  # noqa: SIM105 (contextlib is not loaded; importing it costs)
            sys.stderr.write(f"guard (fail-closed): hook client: {type(exc).__name__}: {exc}\n")
        except BaseException:
            pass
        return 2


if __name__ == "__main__":
    status = _run()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        status = 2  # the answer may not have reached the host: block
    os._exit(status)  # the answer is out; the interpreter's tear-down is not needed
