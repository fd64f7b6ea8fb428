"""``guard ui``: the plan-mode cockpit, a terminal app over guard's own state.

:mod:`guard.ui.state` reads the worktree's sessions, event logs, audit log and
plan file into plain data and carries out the user's answers with the CLI's
library calls (no Textual there); :mod:`guard.ui.app` draws it with Textual,
an optional dependency (``pip install 'openoxide-guard[ui]'``) that the hooks
never import.
"""
