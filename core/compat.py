"""Standard-library features newer than Python 3.9, the oldest Python SegScope supports (the MindX SDK's)."""

from __future__ import annotations

import concurrent.futures
import itertools
import socket
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

#: What a timed-out wait raises: on 3.9 a socket's and a future's timeouts are not yet `TimeoutError`.
TIMEOUTS = (TimeoutError, socket.timeout, concurrent.futures.TimeoutError)


def pairwise(items: Iterable[T]) -> Iterator[tuple[T, T]]:
    """Successive overlapping pairs: ABC -> AB, BC (`itertools.pairwise`, new in 3.10)."""
    first, second = itertools.tee(items)
    next(second, None)
    return zip(first, second)
