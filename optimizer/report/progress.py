"""Progress for long work on a terminal: one rich bar fed by a `progress(done, total, label)`
callback. Never required: library code takes the callback as optional and works without it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from optimizer.report.info import StatusInfo

ProgressFn = Callable[[int, int, str], None]


@contextmanager
def bar(console: Console, title: str) -> Iterator[ProgressFn]:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(title, total=None)

        def update(done: int, total: int, label: str) -> None:
            progress.update(task, completed=done, total=total, description=f"{title}: {label}")

        yield update


# What the review page's progress line shows, from `status`: small, so it can be asked every few
# seconds while a daemon runs without sending the whole report each time.
PROGRESS_KEYS = (
    "running",
    "status",
    "activity",
    "iteration",
    "iterations_done",
    "max_iterations",
    "versions",
    "pending",
    "current_best",
    "spent_usd",
    "spent_text",
    "budget_usd",
    "finish",
    "deadline",
    "seconds_left",
    "stop_reason",
    "ended",
    "last_error",
    "elapsed_s",
)


def snapshot(info: StatusInfo) -> dict:
    """The progress fields of a status dict, in a fixed order."""
    return {key: info.get(key) for key in PROGRESS_KEYS}
