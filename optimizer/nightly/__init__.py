"""Nights that run themselves (docs/design.md §17): `schedule` writes a systemd user timer, or a crontab
line where systemd's user manager is not reachable, whose command is the hidden `optimizer
nightly`; `night` is that command's work (resume the last run from its best with a fresh budget
and deadline, or start a new run chained to it). An entry point like cli and daemon: it may
import any stage and the daemon, and only entry points import it. Never installs anything
without being asked, and never spends without a budget."""
