"""The local engine's threads: every task run, at once where there are workers, the answers in the tasks' order."""

from __future__ import annotations

import threading

from pond.core.cluster import run_threads


def test_tasks_run_side_by_side_and_answer_in_their_order():
    """The first task waits for the second: on one thread it would wait out its timeout and answer False."""
    second_ran = threading.Event()

    def task(i: int) -> tuple[int, bool]:
        if i == 0:
            return i, second_ran.wait(timeout=10)
        second_ran.set()
        return i, True

    assert run_threads(2, "test", task, [(0,), (1,), (2,)]) == [(0, True), (1, True), (2, True)]


def test_one_worker_runs_here_in_order():
    order: list[int] = []
    assert run_threads(1, "test", lambda i: order.append(i) or i * i, [(3,), (1,), (2,)]) == [9, 1, 4]
    assert order == [3, 1, 2]
