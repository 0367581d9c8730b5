"""What a person watching `optimizer run` in the foreground sees: on a terminal, one live line
(iteration, stage, runs, spend, best, elapsed, ETA); anywhere else (a pipe, a file, daemon.out)
one plain line per stage change, without a control sequence. Never the only record of anything:
the log and state.db hold it all."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn
from rich.text import Text

from optimizer import words
from optimizer.budget import pace
from optimizer.budget.cost_model import Estimate
from optimizer.budget.estimate import per_iteration_usd
from optimizer.config import Settings
from optimizer.events import Activity, Decided, Event, Finished, ProposalMade, TrialGraded
from optimizer.store import iterations, ledger, money, runs, versions
from optimizer.store.db import Store
from optimizer.store.runs import Run


class Reporter:
    def __init__(
        self,
        console: Console | None,
        store: Store,
        *,
        simulated: bool,
        settings: Settings | None = None,
    ) -> None:
        self.console, self.store, self.simulated, self.settings = (
            console,
            store,
            simulated,
            settings,
        )
        self.runs = 0
        self._activity = "starting"
        self._progress: Progress | None = None
        self._started = time.monotonic()
        # (finished iterations, what they cost): the ledger's sum changes only when one finishes,
        # so the live line, refreshed after every graded run, sums it once per iteration.
        self._spent_by_done = (0, 0.0)

    @property
    def live(self) -> bool:
        return self.console is not None and self.console.is_terminal

    def __enter__(self) -> Reporter:
        self._started = time.monotonic()
        if self.console is not None and self.console.is_terminal:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}", markup=False),
                console=self.console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self._line())
        elif self.console is not None and self.simulated:
            self._plain("provider: sim — every result of this run is simulated")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def _plain(self, text: str) -> None:
        # Unstyled text and no markup: nothing a terminal would interpret reaches a file or pipe.
        assert self.console is not None
        self.console.print(Text(text), markup=False, highlight=False, soft_wrap=True)

    def _line(self) -> str:
        account = money.account(self.store)
        spent = account.budgeted_usd  # the budget's count, as the stop line's (adoptions apart)
        apart = f" (+${account.adoptions_usd:.2f} on adoptions)" if account.adoptions_usd else ""
        run = runs.row(self.store) or Run()
        best = run.best
        score = versions.score(self.store, best)
        shown = f"{score:.3f}" if score is not None else "…"
        # The live line is all a terminal shows; elsewhere the banner at the start says it once.
        sim = " [simulated]" if self.simulated and self.live else ""
        return " · ".join(
            [
                self._where(),
                f"{self.runs} runs graded",
                f"${spent:.2f} spent{apart}",
                f"best {best} {shown}{sim}",
                *self._times(run, spent),
            ]
        )

    def _where(self) -> str:
        """The iteration (of the limit) and the stage, without saying the iteration twice. A
        stage that names no iteration belongs to the open one; setup and the sealed test to none."""
        named = re.match(r"iteration (\d+): (.*)", self._activity)
        if named:
            n, stage = int(named.group(1)), named.group(2)
        elif self._activity.startswith(("baseline", "v0:", "sealed test")):
            return self._activity
        else:
            open_ = iterations.open_number(self.store)
            if open_ is None:
                return self._activity
            n, stage = open_, self._activity
        cap = self.settings.loop.max_iterations if self.settings is not None else None
        limit = f" of {cap}" if cap is not None else ""
        return f"iteration {n}{limit}: {stage}"

    def _times(self, run: Run, spent: float) -> list[str]:
        elapsed = f"{pace.clock(time.monotonic() - self._started)} elapsed"
        if self.settings is None:
            return [elapsed]
        seconds, done = pace.seconds_in_iterations(iterations.times(self.store))
        end = pace.finish(
            seconds_in_iterations=seconds,
            done=done,
            left=self._left(run, done, spent),
            to_deadline=self._to_deadline(),
        )
        return [elapsed, pace.eta_text(end, done)]

    def _left(self, run: Run, done: int, spent: float) -> int | None:
        assert self.settings is not None
        s = self.settings
        per = None
        if s.budget.usd:
            est: Estimate = run.estimate or Estimate()
            # The ledger's sum only once an iteration has finished: before, nothing is measured.
            if done and self._spent_by_done[0] != done:
                usd = ledger.in_iterations_usd(self.store)
                self._spent_by_done = (done, usd)
            measured = self._spent_by_done[1] if done else 0.0
            per = pace.usd_per_iteration(
                estimated=per_iteration_usd(est), spent_in_iterations=measured, done=done
            )
        budget_left = s.budget.usd - spent if s.budget.usd else None
        return pace.iterations_left(
            done, s.loop.max_iterations, budget_left_usd=budget_left, usd_per_iteration=per
        )

    def _to_deadline(self) -> float | None:
        at = pace.parse_time(self.settings.budget.deadline if self.settings else None)
        return None if at is None else (at - datetime.now(UTC)).total_seconds()

    def _refresh(self) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=self._line())

    def on(self, event: Event) -> None:
        """A subscriber of the run's events (RunState): the ones the live line shows."""
        match event:
            case Activity():
                self.activity(event.text)
            case TrialGraded():
                self.run_done()
            case Decided():
                self.decided(event.label, event.verdict, event.reason)
            case Finished():
                self.finished(event.reason, event.best)
            case ProposalMade() if event.refused:
                self.refused(event.iteration, event.k, event.refused)
            case _:
                pass  # the log's alone

    def activity(self, text: str) -> None:
        changed = text != self._activity
        self._activity = text
        if self._progress is not None:
            self._refresh()
        elif self.console is not None and changed:
            self._plain(f"{self._line()}")

    def run_done(self) -> None:
        self.runs += 1
        self._refresh()

    def decided(self, label: str, verdict: str, reason: str) -> None:
        line = words.decision(label, verdict, reason)
        if self.live:
            assert self.console is not None
            colour = {"won": "green", "lost": "red"}.get(verdict, "yellow")
            head = f"{label} {verdict}"
            self.console.print(Text(head, style=colour) + Text(line[len(head) :]), highlight=False)
        elif self.console is not None:
            self._plain(line)
        self._refresh()

    def refused(self, n: int, k: int, problem: str) -> None:
        """A refused proposal said as it happens, with what it cost: it makes no version, so no
        decision line would otherwise name it."""
        spent = ledger.scope_usd(self.store, f"proposal {n}-{k}")
        why = words.clip(problem.split(": write")[0].removeprefix("the proposal "), 140)
        line = f"iteration {n}: proposal {k + 1} refused: {why}; {words.dollars(spent)}"
        if self.console is not None:
            self._plain(line)
        self._refresh()

    def finished(self, reason: str, best: str) -> None:
        if self.console is not None:
            self._plain(f"{words.ended('stopped', reason)}; current best: {best}")
