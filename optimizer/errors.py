"""The one small exception family of the product, mapped to exit codes by the command line.
Per-run failures are data, never these exceptions; only bad input and systemic failures raise."""

from __future__ import annotations


class OptimizerError(Exception):
    """A failure that stops the work; exit code 1."""

    exit_code = 1

    def __init__(self, *problems: str) -> None:
        self.problems = [p for p in problems if p] or ["the work failed"]
        super().__init__("\n".join(self.problems))


class BadInput(OptimizerError):
    """Input the user must fix: one sentence per problem naming the file, the field and the fix."""

    exit_code = 2


class WorkFailed(OptimizerError):
    """A systemic failure (no credentials accepted, disk full, a broken database)."""

    exit_code = 1


class RunStopped(OptimizerError):
    """A clean stop that is not a failure: a budget, a deadline, a stop request (exit 0)."""

    exit_code = 0


class BudgetExhausted(RunStopped):
    """The next model call would pass the run's budget, so it never starts."""


class Interrupted(RunStopped):
    """An urgent stop (a signal, the stop file, the deadline) arrived inside a stage: the units
    in flight finished and were committed, the others were not started; the step that asked
    leaves its version undecided."""


class ProviderUnavailable(WorkFailed):
    """The model provider failed many calls in a row for good: an outage, not a few bad units.
    The run stops with everything committed; a resume retries what was left unscored."""


class InfraFailure(Exception):  # noqa: N818 - a kind of outcome, named as docs/design.md §7 names it
    """A failure of ours inside one unit of work (the sandbox could not start, a check could not
    run): the unit is left unscored and retried, never scored 0 (docs/design.md §7)."""


class ResourceLimit(Exception):  # noqa: N818 - a kind of outcome, as InfraFailure
    """A limit of the whole run that its own commands passed (the workspace's total size): the
    run stops and fails, and it scores, as a timeout does (docs/design.md §7: the skill's failure)."""


class ProviderSpendLimit(WorkFailed):
    """The provider says the account's spend limit is reached; retrying cannot help."""


# What the disk says when it cannot go on: every later write would fail the same way.
_DISK_ERRNOS = frozenset({28, 30, 122})  # ENOSPC, EROFS, EDQUOT


def is_systemic(exc: BaseException) -> bool:
    """A failure that must stop the whole run (docs/design.md §3) rather than be recorded as data of the
    one unit it happened in: our own errors (credentials, budget, bad input, a model provider that
    failed for good), a full or read-only disk, and anything that is not an Exception at all."""
    if not isinstance(exc, Exception) or isinstance(exc, OptimizerError):
        return True
    return isinstance(exc, OSError) and exc.errno in _DISK_ERRNOS
