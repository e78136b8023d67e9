"""Rich progress bars for every long step, shared so they look the same everywhere."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)
log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 300.0


class LoggedProgress(Progress):
    """A progress bar that, with no terminal to draw on (a log file, a table's cell, CI), logs
    each task's count every `heartbeat` seconds instead: one epoch of the task-agnostic SRA stage
    takes half an hour, and its log would otherwise say nothing in between."""

    def __init__(self, *columns, heartbeat: float = HEARTBEAT_SECONDS, **kwargs) -> None:
        super().__init__(*columns, **kwargs)
        self.heartbeat = heartbeat
        self._last_logged: dict[TaskID, float] = {}

    def add_task(self, description: str, *args, **kwargs) -> TaskID:
        task_id = super().add_task(description, *args, **kwargs)
        self._last_logged[task_id] = self.get_time()
        return task_id

    def update(self, task_id: TaskID, **kwargs) -> None:
        super().update(task_id, **kwargs)
        self._heartbeat(task_id)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._heartbeat(task_id)

    def _heartbeat(self, task_id: TaskID) -> None:
        now = self.get_time()
        if not self.disable or now - self._last_logged[task_id] < self.heartbeat:
            return
        self._last_logged[task_id] = now
        task = self._tasks[task_id]
        status = task.fields.get("status") or ""
        left = task.time_remaining
        log.info("%s: %d/%s%s, %s elapsed%s", task.description, task.completed,
                 "?" if task.total is None else f"{task.total:.0f}", f" ({status})" if status else "",
                 timedelta(seconds=round(task.elapsed or 0)),
                 "" if left is None else f", ~{timedelta(seconds=round(left))} left")


@contextmanager
def progress_bar(heartbeat: float = HEARTBEAT_SECONDS,
                 get_time: Callable[[], float] | None = None) -> Iterator[Progress]:
    with LoggedProgress(
        TextColumn("[bold blue]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,  # logs and CI output get the log lines (and the heartbeat) instead
        heartbeat=heartbeat,
        get_time=get_time,
    ) as progress:
        yield progress
