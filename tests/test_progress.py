"""Without a terminal, a long progress bar logs its count every few minutes instead of drawing."""

from __future__ import annotations

import logging

from distil.common.progress import progress_bar


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_without_a_terminal_a_task_logs_its_count_once_per_heartbeat(caplog):
    clock = Clock()
    caplog.set_level(logging.INFO, logger="distil.common.progress")
    with progress_bar(heartbeat=60, get_time=clock) as progress:  # pytest's stderr is not a terminal
        bar = progress.add_task("task-agnostic SRA distillation", total=10, status="")
        for step in range(1, 11):
            clock.now += 25  # a step every 25 s: a line at 75 s (step 3), 150 s (step 6), 225 s (step 9)
            progress.update(bar, advance=1, status=f"loss {1 / step:.2f}")
    assert [r.getMessage().split(", ~")[0] for r in caplog.records] == [
        "task-agnostic SRA distillation: 3/10 (loss 0.33), 0:01:15 elapsed",
        "task-agnostic SRA distillation: 6/10 (loss 0.17), 0:02:30 elapsed",
        "task-agnostic SRA distillation: 9/10 (loss 0.11), 0:03:45 elapsed",
    ]
    assert caplog.records[0].getMessage().endswith(", ~0:02:55 left")  # 7 steps left at 25 s each


def test_advance_without_status_logs_the_count_alone(caplog):
    clock = Clock()
    caplog.set_level(logging.INFO, logger="distil.common.progress")
    with progress_bar(heartbeat=60, get_time=clock) as progress:
        bar = progress.add_task("teacher sentence vectors (cls)", total=None, status="")
        clock.now += 61
        progress.advance(bar, 512)
    assert [r.getMessage() for r in caplog.records] == ["teacher sentence vectors (cls): 512/?, 0:01:01 elapsed"]
