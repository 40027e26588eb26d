"""One MindX stream per Ascend device in one process (`--devices` with the MindX backend).

The SDK creates every stream of a process in its one `CreateMultipleStreams` call, so the chosen stream is
copied once per device, each copy's `stream_config.deviceId` rewritten. `StreamDealer` sends each image to
the copy with the fewest images in flight (the first free device) and keeps each device's usage.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Sequence
from typing import Any

from .pool import UsageLog


def stream_name(stream: str, device: int) -> str:
    return f"{stream}_device{device}"


def copy_per_device(config: dict[str, Any], stream: str, devices: Sequence[int]) -> list[str]:
    """Replace `stream` in the pipeline JSON by one copy per device; the copies' names, in device order."""
    original = config.pop(stream)
    names = []
    for device in devices:
        name = stream_name(stream, device)
        copied = copy.deepcopy(original)
        copied.setdefault("stream_config", {})["deviceId"] = str(device)
        config[name] = copied
        names.append(name)
    return names


class StreamDealer:
    """Which stream (device) takes the next image, and how busy each one was.

    A device counts as busy from an image's send (or its previous result, if later) to that image's result:
    its results come first-in first-out, so the busy times add up to the periods it had work."""

    def __init__(self, streams: Sequence[str], labels: Sequence[str]):
        self.streams = list(streams)
        self.labels = dict(zip(streams, labels))
        self.in_flight = dict.fromkeys(streams, 0)
        self.last_result = dict.fromkeys(streams, 0.0)
        self.usage = UsageLog(labels)
        self._lock = threading.Lock()

    def take(self) -> str:
        """The least-loaded stream (the first of equals), counted as one more image in flight."""
        with self._lock:
            stream = min(self.streams, key=lambda s: self.in_flight[s])
            self.in_flight[stream] += 1
            return stream

    def done(self, stream: str, sent: float, ok: bool = True) -> None:
        now = time.perf_counter()
        with self._lock:
            self.in_flight[stream] = max(0, self.in_flight[stream] - 1)
            busy = now - max(sent, self.last_result[stream])
            self.last_result[stream] = now
        if ok:
            self.usage.record(self.labels[stream], busy)
