"""Setting hosts up: ``guard install``, ``guard doctor``, and what they read of a host.

``install`` writes guard's hook command into a host's settings (and removes it),
``doctor`` says which hosts are wired and which guard layers are active,
``host_state`` reads what a host decided about a project (trust, a rewritten file),
``host_settings`` is what a host's ``settings`` part adds (guard/hosts/<host>/settings.py).

It holds no hook: the hook adapters, the hook client and the daemon answering the
hosts' calls are in :mod:`guard.hooks`.
"""
