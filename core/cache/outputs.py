"""A model's outputs for an input, kept in the cache: the fp32 results a `--precision` run checks itself against,
so a repeat run pays only for the faster model.

An entry's key is the model file's content, the runtime and its settings (ONNX Runtime's version and thread
count) and the input's content (xxh3-128 of its name, dtype, shape and bytes): the same model on the same
input under the same runtime, whose outputs a hit gives back as they were stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..files.fileio import read_bytes
from .settings import decoded_store

if TYPE_CHECKING:
    from ..backends.embedded import ModelSession

OUTPUTS = "outputs"
SCHEME = 1


class KeptOutputs:
    """`session` (the model at `model`, run by `runtime`, e.g. "onnxruntime 1.22.0, 2 threads") with its outputs
    kept in the cache, where it is on."""

    def __init__(self, session: ModelSession, model: Path, runtime: str):
        self.session = session
        self.store = decoded_store()
        if self.store is not None:
            from .store import content_digest  # only with a store open: the digest's library is the store's

            self._digest = content_digest
            self._prefix = f"{OUTPUTS}/{SCHEME}/{content_digest(read_bytes(model, 'model'))}/{runtime}"

    def run(self, output_names: None, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        if self.store is None:
            return self.session.run(output_names, feeds)
        parts = [f"{name}:{array.dtype.str}:{array.shape}:{self._digest(np.ascontiguousarray(array).data)}"
                 for name, array in sorted(feeds.items())]
        key = f"{self._prefix}/{'/'.join(parts)}"
        entry = self.store.get(key, OUTPUTS)
        if entry is not None:
            return entry.arrays
        outputs = self.session.run(output_names, feeds)
        self.store.put(key, [np.asarray(o) for o in outputs], {})
        return outputs
