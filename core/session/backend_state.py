"""The viewer's backend without Qt: which one is chosen, what the open one can do, whether a run uses it.

`BackendState` is the one owner of these facts (the session reads the model's classes and name from it, the
run controller opens what is chosen and reports back, widgets subscribe to `events`). Opening a choice while
another backend is open remembers that one: should the new one fail, `failed` goes back to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from ..backends.base import Capabilities
from ..events import Evented, Signal, SignalGroup


class Choice(Protocol):
    """What the state needs of a chosen backend (the viewer's `core.backend_choice.BackendChoice`): a one-line
    description."""

    def describe(self) -> str: ...


ChoiceT = TypeVar("ChoiceT", bound=Choice)


@dataclass(frozen=True)
class BackendOpened:
    choice: Any
    capabilities: Capabilities


@dataclass(frozen=True)
class BackendFailed:
    """Opening `choice` failed (`text`, `details`: why); `fallback` is the choice opened again instead (None:
    there is none)."""

    choice: Any
    text: str
    details: str
    fallback: Any = None


class BackendEvents(SignalGroup):
    """What views subscribe to: `opening` (the choice to open now), `opened`, `failed`, `busy` (new, old)."""

    opening = Signal(object)
    opened = Signal(BackendOpened)
    failed = Signal(BackendFailed)
    busy = Signal(bool, bool)


class BackendState(Generic[ChoiceT]):
    """The chosen backend (`choice`), the open one's `capabilities` (None while none is open) and `busy` (a run
    uses it)."""

    busy = Evented[bool](False)

    def __init__(self, choice: ChoiceT) -> None:
        self.events = BackendEvents()
        self.choice = choice
        self.capabilities: Capabilities | None = None
        self._fallback: ChoiceT | None = None  # reopened when the choice being opened fails

    @property
    def class_names(self) -> tuple[str, ...]:
        """The open model's classes (none while no backend is open)."""
        return self.capabilities.class_names if self.capabilities is not None else ()

    @property
    def model(self) -> str:
        """The open model's name ("" while none is open, or when the backend does not say)."""
        return self.capabilities.details.get("model", "") if self.capabilities is not None else ""

    def open(self, choice: ChoiceT) -> None:
        """Choose `choice`: nothing is open until `opened` (an `opening` subscriber opens it)."""
        if self.capabilities is not None:
            self._fallback = self.choice
        self.choice, self.capabilities = choice, None
        self.events.opening.emit(choice)

    def opened(self, capabilities: Capabilities) -> None:
        """The chosen backend is open."""
        self._fallback, self.capabilities = None, capabilities
        self.events.opened.emit(BackendOpened(self.choice, capabilities))

    def failed(self, text: str, details: str) -> None:
        """Opening the choice failed (`text`, `details`: why): the backend open before, if any, is opened again."""
        failed, fallback = self.choice, self._fallback
        self._fallback = None
        back = fallback if fallback is not None and fallback != failed else None
        self.events.failed.emit(BackendFailed(failed, text, details, back))
        if back is not None:
            self.open(back)

    def set_busy(self, busy: bool) -> None:
        """A run starts (True) or ends (False)."""
        self.busy = busy
