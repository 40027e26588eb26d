"""The viewer's backend state without Qt: what is chosen, what the open one can do, going back to the backend
open before when a new choice fails, and busy, each announced to subscribers."""

from __future__ import annotations

from dataclasses import dataclass

from segscope.core.backends.base import Capabilities
from segscope.core.session.backend_state import BackendState
from segscope.core.session.session import Session

CAPS = Capabilities("embedded", "CPU", (64, 48), ("background", "defect"), {"model": "/models/a.onnx"})


@dataclass(frozen=True)
class Choice:
    name: str

    def describe(self) -> str:
        return self.name


def recorded(state: BackendState) -> list[tuple]:
    """Every event as (name, its arguments), a payload's fields as arguments."""
    seen: list[tuple] = []
    events = state.events
    events.opening.connect(lambda choice: seen.append(("opening", choice)))
    events.opened.connect(lambda opened: seen.append(("opened", opened.choice, opened.capabilities)))
    events.failed.connect(lambda failed: seen.append(("failed", failed.choice, failed.text, failed.details,
                                                      failed.fallback)))
    events.busy.connect(lambda busy, _old: seen.append(("busy_changed", busy)))
    return seen


def test_a_choice_is_open_once_its_capabilities_are_known_and_the_session_reads_them():
    state = BackendState(Choice("a"))
    session = Session(persist=False, backend=state)
    seen = recorded(state)
    assert session.capabilities is None and session.class_names == () and state.model == ""
    state.open(Choice("b"))
    assert state.choice == Choice("b") and state.capabilities is None
    state.opened(CAPS)
    assert seen == [("opening", Choice("b")), ("opened", Choice("b"), CAPS)]
    assert session.capabilities is CAPS and session.class_names == ("background", "defect")
    assert state.model == "/models/a.onnx"


def test_a_failed_choice_goes_back_to_the_backend_open_before():
    state = BackendState(Choice("a"))
    state.opened(CAPS)
    seen = recorded(state)
    state.open(Choice("b"))
    state.failed("no such host", "details")
    assert seen == [("opening", Choice("b")), ("failed", Choice("b"), "no such host", "details", Choice("a")),
                    ("opening", Choice("a"))]
    assert state.choice == Choice("a") and state.capabilities is None  # reopening it
    state.failed("gone too", "")  # the one before fails as well: nothing left to go back to
    assert seen[-1] == ("failed", Choice("a"), "gone too", "", None) and state.choice == Choice("a")


def test_nothing_to_go_back_to_when_nothing_was_open():
    state = BackendState(Choice("a"))
    seen = recorded(state)
    state.open(Choice("b"))
    state.failed("bad card", "")
    assert seen == [("opening", Choice("b")), ("failed", Choice("b"), "bad card", "", None)]


def test_busy_is_announced():
    state = BackendState(Choice("a"))
    seen = recorded(state)
    state.set_busy(True)
    assert state.busy
    state.set_busy(False)
    assert seen == [("busy_changed", True), ("busy_changed", False)] and not state.busy
