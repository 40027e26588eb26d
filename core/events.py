"""Evented state for the Qt-free models (the session, the mask document, the backend state).

Models announce every change through `psygnal` signals (the event library napari's models are built on; no
Qt): a model's `events` is a `psygnal.SignalGroup` of typed signals, and each `Evented` field of the model
announces its own assignment there as `(new, old)`. Views (Qt widgets, tests, a future web front end)
`connect` in their constructors; callbacks run in the emitting thread, in connection order, and the models
are changed from one thread only (the GUI's), so Qt views can update directly.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

from psygnal import Signal, SignalGroup

__all__ = ["Evented", "Signal", "SignalGroup"]

T = TypeVar("T")


class Evented(Generic[T]):
    """A field of a model whose assignment emits `model.events.<name>(new, old)` when the value changes (another
    object that is not equal): `current = Evented[DatasetItem | None](None)` with `current = Signal(...)` in the
    model's events."""

    def __init__(self, default: T) -> None:
        self.default = default
        self.name = self.attribute = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name, self.attribute = name, f"_evented_{name}"

    @overload
    def __get__(self, model: None, owner: type) -> Evented[T]: ...

    @overload
    def __get__(self, model: object, owner: type) -> T: ...

    def __get__(self, model: object | None, owner: type) -> T | Evented[T]:
        if model is None:
            return self
        return getattr(model, self.attribute, self.default)  # type: ignore[no-any-return]

    def __set__(self, model: Any, value: T) -> None:
        old = getattr(model, self.attribute, self.default)
        setattr(model, self.attribute, value)
        if value is not old and not _equal(value, old):
            getattr(model.events, self.name).emit(value, old)


def _equal(a: object, b: object) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # e.g. arrays: another object is a change
        return False
