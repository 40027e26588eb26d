"""The views of the backend state (`core.session.backend_state`): the status bar's backend label and the messages say
what is opening, what opened and why one failed; each choice that opened is remembered for the next start."""

from __future__ import annotations

from typing import Any

from ...core.session.backend_state import BackendFailed, BackendOpened, BackendState
from ..runtime import settings
from .message_area import MessageArea
from .status_labels import StatusLabels


def follow_backend(state: BackendState[Any], labels: StatusLabels, messages: MessageArea) -> None:
    def opened(event: BackendOpened) -> None:
        capabilities = event.capabilities
        settings.save_backend_profile(event.choice.as_profile())
        labels.backend_ready(capabilities)
        messages.add("info", f"Backend ready: {capabilities.name} on {capabilities.device}",
                     "\n".join(f"{k}: {v}" for k, v in capabilities.details.items()))

    def failed(event: BackendFailed) -> None:
        choice, fallback = event.choice, event.fallback
        if fallback is not None:
            messages.add("error", f"Could not open {choice.describe()}: {event.text}; back to {fallback.describe()}",
                         event.details)
        else:
            messages.add("error", f"Could not open {choice.describe()}: {event.text}", event.details)
            labels.backend_failed(choice.describe())

    state.events.opening.connect(lambda choice: labels.backend_opening(choice.describe()))
    state.events.opened.connect(opened)
    state.events.failed.connect(failed)
