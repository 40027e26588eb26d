"""The one job runner (gui/runtime/jobs.py): answers in the GUI thread, errors as messages, keys that supersede, lanes
that keep order and thread, dequeueing, and a shutdown that waits. Work is held at gates (threading.Event) so
each test decides what is running, queued or done; no timings."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from segscope.core.errors import SegScopeError
from segscope.gui.runtime.jobs import AUTOSAVE, BACKEND, SHARED, TILES, started_after

pytestmark = pytest.mark.gui

MAIN = threading.main_thread()


class Gate:
    """`hold()` on a worker waits until `open()`; `entered` is set once a worker waits there."""

    def __init__(self) -> None:
        self.entered, self.opened = threading.Event(), threading.Event()

    def hold(self, value: object = None) -> object:
        self.entered.set()
        assert self.opened.wait(30), "the gate was never opened"
        return value

    def open(self) -> None:
        self.opened.set()


def test_a_function_runs_on_a_worker_and_answers_in_the_gui_thread(qtbot, jobs):
    ran_on, answered_on = [], []

    def work() -> int:
        ran_on.append(threading.current_thread())
        return 6 * 7

    jobs.submit("answer", work, lambda value: answered_on.append((threading.current_thread(), value)))
    assert jobs.busy("answer") and jobs.pending == 1
    qtbot.waitUntil(lambda: bool(answered_on))
    assert ran_on[0] is not MAIN and answered_on == [(MAIN, 42)]
    assert not jobs.busy("answer") and jobs.pending == 0


def test_a_generator_yields_each_item_in_the_gui_thread_then_finishes(qtbot, jobs):
    seen: list[object] = []
    jobs.stream("count", lambda: iter(range(5)), lambda item: seen.append((item, threading.current_thread() is MAIN)),
                lambda: seen.append("finished"))
    qtbot.waitUntil(lambda: "finished" in seen)
    assert seen == [(n, True) for n in range(5)] + ["finished"]


def test_a_job_started_after_a_wait_is_under_way_meanwhile_and_a_newer_one_supersedes_it(qtbot, jobs):
    """`started_after`: the job counts as running from its submission (what waits for the jobs waits for it), a newer
    job of its key drops it before its first item, and one left alone yields everything after the wait."""
    seen: list[object] = []
    jobs.stream("open", started_after(0.5, lambda: iter([1, 2])), seen.append, lambda: seen.append("first ended"))
    assert jobs.busy("open") and jobs.pending == 1
    jobs.stream("open", started_after(0.0, lambda: iter([3])), seen.append, lambda: seen.append("second ended"))
    qtbot.waitUntil(lambda: not jobs.busy("open"), timeout=10000)
    assert seen == [3, "second ended"]  # (the first one's items and end are dropped)
    jobs.stream(None, started_after(0.05, lambda: iter([4, 5])), seen.append, lambda: seen.append("third ended"))
    qtbot.waitUntil(lambda: not jobs.pending, timeout=10000)
    assert seen[2:] == [4, 5, "third ended"]


def test_errors_come_back_as_messages_never_as_exceptions(qtbot, jobs):
    answers: list[tuple[str, str]] = []

    def user_error() -> None:
        raise SegScopeError("mask.png: not a mask; choose another file")

    def bug() -> None:
        raise ZeroDivisionError("division by zero")

    jobs.submit("a", user_error, failed=lambda text, details: answers.append((text, details)))
    with qtbot.waitSignal(jobs.failed, timeout=10000) as unhandled:
        jobs.submit("b", bug)
    qtbot.waitUntil(lambda: bool(answers))
    assert answers[0][0] == "mask.png: not a mask; choose another file"  # one line, no traceback
    key, text, details = unhandled.args
    assert key == "b" and text == "Internal error: ZeroDivisionError: division by zero"
    assert "Traceback" in details and "in bug" in details


def test_a_newer_job_of_a_key_supersedes_the_older_ones(qtbot, jobs):
    gate, started, answers = Gate(), [], []
    blocker = Gate()  # holds the other shared thread, so the second job of "k" waits in the queue
    jobs.submit("other", lambda: blocker.hold())
    assert blocker.entered.wait(30)
    jobs.submit("k", lambda: (started.append(1), gate.hold("first"))[1], answers.append)
    assert gate.entered.wait(30)  # the first runs
    jobs.submit("k", lambda: started.append(2) or "second", answers.append)  # queued behind the blocker
    jobs.submit("k", lambda: started.append(3) or "third", answers.append)  # supersedes both
    gate.open()
    blocker.open()
    qtbot.waitUntil(lambda: not jobs.busy("k"))
    assert answers == ["third"]  # the running first one's answer is dropped
    assert started == [1, 3]  # the queued second one never ran


def test_a_superseded_generator_stops_at_its_next_yield(qtbot, jobs):
    gate, produced, seen = Gate(), [], []

    def items() -> Iterator[int]:
        for n in range(100):
            produced.append(n)
            if n == 2:
                gate.hold()
            yield n

    jobs.stream("rows", items, seen.append)
    assert gate.entered.wait(30)
    jobs.cancel("rows")
    gate.open()
    qtbot.waitUntil(lambda: not jobs.busy("rows"))
    assert produced == [0, 1, 2]  # item 2 was made, then the loop stopped: nothing more was produced
    assert 2 not in seen


def test_a_serial_lane_runs_its_jobs_in_order_on_one_thread(qtbot, jobs):
    ran: list[tuple[int, threading.Thread]] = []
    for n in range(6):
        jobs.submit(None, lambda n=n: ran.append((n, threading.current_thread())), lane=BACKEND)
    qtbot.waitUntil(lambda: jobs.pending == 0)
    assert [n for n, _ in ran] == list(range(6))
    assert len({thread for _, thread in ran}) == 1 and ran[0][1] is not MAIN
    jobs.submit(None, lambda: ran.append((6, threading.current_thread())), lane=BACKEND).wait()
    assert ran[-1][1] is ran[0][1]  # the same thread later on: what a backend opened there needs
    jobs.submit(None, lambda: ran.append((7, threading.current_thread())), lane=AUTOSAVE).wait()
    assert ran[-1][1] is not ran[0][1]  # another lane, another thread


def test_the_tile_lane_reads_two_at_a_time_and_dequeues_what_has_not_started(qtbot, jobs):
    gates = [Gate() for _ in range(4)]
    answers: list[int] = []
    handles = [jobs.submit(None, lambda n=n: gates[n].hold(n), answers.append, lane=TILES) for n in range(4)]
    assert gates[0].entered.wait(30) and gates[1].entered.wait(30)  # two run at once
    assert not handles[0].dequeue()  # running: left alone
    assert handles[3].dequeue()  # queued: taken off, never runs
    for gate in gates:
        gate.open()
    qtbot.waitUntil(lambda: jobs.pending == 0)
    assert sorted(answers) == [0, 1, 2] and not gates[3].entered.is_set()


def test_relay_reaches_the_gui_thread_in_order_with_the_answer(qtbot, jobs):
    seen: list[object] = []
    progress = jobs.relay(lambda done, total: seen.append((done, total, threading.current_thread() is MAIN)))

    def work() -> str:
        for n in range(1, 4):
            progress(n, 3)
        return "done"

    jobs.submit(None, work, seen.append, lane=BACKEND)
    qtbot.waitUntil(lambda: "done" in seen)
    assert seen == [(1, 3, True), (2, 3, True), (3, 3, True), "done"]


def test_relay_latest_merges_the_calls_made_while_one_is_on_its_way(qtbot, jobs):
    """A progress count posted 100 times while the GUI thread takes no event reaches it once, with the newest
    count, before the answer that followed; once taken, the next calls reach it again."""
    seen: list[object] = []
    progress = jobs.relay_latest(lambda done, total: seen.append((done, total, threading.current_thread() is MAIN)))

    def work(first: int, last: int) -> int:
        for n in range(first, last + 1):
            progress(n, 200)
        return last

    assert jobs.submit(None, lambda: work(1, 100), seen.append, lane=BACKEND).wait(30)  # (no event taken meanwhile)
    qtbot.waitUntil(lambda: 100 in seen)
    assert seen == [(100, 200, True), 100]
    assert jobs.submit(None, lambda: work(101, 200), seen.append, lane=BACKEND).wait(30)
    qtbot.waitUntil(lambda: 200 in seen)
    assert seen[2:] == [(200, 200, True), 200]


def test_answers_queued_while_the_gui_thread_was_busy_come_back_in_order_and_a_bug_strands_none(qtbot, jobs):
    """500 answers handed back while the GUI thread takes no event all arrive, in order; an answer that raises (a
    bug, reported as Qt reports an exception in a slot) leaves the ones after it to come."""
    seen: list[object] = []

    def each(item: int) -> None:
        if item == 3:
            raise RuntimeError("a bug in one answer")
        seen.append(item)

    assert jobs.stream(None, lambda: iter(range(500)), each, lambda: seen.append("finished"), lane=BACKEND).wait(30)
    with qtbot.capture_exceptions() as exceptions:
        qtbot.waitUntil(lambda: "finished" in seen)
    assert seen == [n for n in range(500) if n != 3] + ["finished"]
    assert [str(exc) for _type, exc, _tb in exceptions] == ["a bug in one answer"]


def test_shutdown_waits_for_running_work_drops_the_queue_and_every_answer(qtbot, jobs):
    gate, finished, answers = Gate(), threading.Event(), []

    def save() -> str:
        gate.hold()
        finished.set()
        return "saved"

    jobs.submit("save", save, answers.append, lane=AUTOSAVE)
    jobs.submit("later", lambda: answers.append("ran") or "later", answers.append, lane=AUTOSAVE)
    assert gate.entered.wait(30)
    threading.Timer(0.2, gate.open).start()  # the save ends while shutdown waits for it
    jobs.shutdown()
    assert finished.is_set()  # never cut off
    assert jobs.pending == 0 and not jobs.busy()
    job = jobs.submit("after", lambda: answers.append("after"), lane=SHARED)
    assert job.finished and job.wait()
    qtbot.wait(50)  # whatever was still queued to the GUI thread is dropped
    assert answers == []


def test_an_unknown_lane_is_refused(jobs):
    with pytest.raises(ValueError, match="no job lane 'gpu'"):
        jobs.submit(None, lambda: None, lane="gpu")
