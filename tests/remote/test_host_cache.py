"""The host cache is trusted only for what it holds: content checked on reuse, writes checked on arrival."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.errors import BackendError
from segscope.core.remote.backend import RemoteBackend
from segscope.core.remote.deploy import worker_bundle

from .sshd import Sshd


def cached_files(cache_dir: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in cache_dir.rglob("*") if p.is_file()}


def test_a_cached_file_changed_to_the_same_size_is_uploaded_again(tiny_model_project, small_dataset, sshd: Sshd,
                                                                  ssh_options, worker_options, caplog) -> None:
    """The campaign's case: a changed model of equal size on the host was used silently (Dice 0.001)."""
    cache = sshd.cache_dir.parent / "same-size-cache"
    options = {**worker_options, "cache_dir": str(cache), "probabilities": "float32"}
    image = small_dataset / "1" / "image.png"
    with RemoteBackend(tiny_model_project.pipeline, sshd.target, ssh_options, **options) as backend:
        backend.infer(image)
    model = next(cache.rglob("tiny.onnx"))
    original = model.read_bytes()
    tampered = bytearray(original)
    tampered[-64:] = bytes(64)  # same size, different weights
    model.write_bytes(bytes(tampered))
    with RemoteBackend(tiny_model_project.pipeline, sshd.target, ssh_options, **options) as backend:
        remote = backend.infer(image)
    assert model.read_bytes() == original
    assert any("had changed since it was uploaded" in r.getMessage() for r in caplog.records)
    with EmbeddedBackend(tiny_model_project.pipeline) as local:
        np.testing.assert_array_equal(remote.probabilities, local.infer(image).probabilities)


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    """A 64 KiB tmpfs (smaller than the worker bundle): a real full disk. Needs root and mount(8)."""
    folder = tmp_path / "full-disk"
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a full host disk needs a small tmpfs: run as root with mount(8)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def test_a_full_host_disk_is_named_and_nothing_truncated_is_kept(tiny_model_project, sshd: Sshd, ssh_options,
                                                                worker_options, small_tmpfs: Path) -> None:
    bundle = worker_bundle()
    assert sum(map(len, bundle.files.values())) > 64 * 1024
    options = {**worker_options, "cache_dir": str(small_tmpfs / "cache")}
    with pytest.raises(BackendError, match=rf"host disk full at {small_tmpfs}/cache/.*\(wrote [\d,]+ of [\d,]+ bytes"):
        RemoteBackend(tiny_model_project.pipeline, sshd.target, ssh_options, **options)
    kept = cached_files(small_tmpfs)
    assert not [p for p in kept if p.name.endswith(".part")]
    for path, data in kept.items():  # whatever was renamed into place is whole
        assert hashlib.sha256(data).digest() == hashlib.sha256(bundle.files[path.name]).digest(), path


def test_a_host_that_talks_on_login_still_has_its_cache_checked(tiny_model_project, small_dataset, sshd: Sshd,
                                                               ssh_options, worker_options, tmp_path: Path) -> None:
    """A login banner (or a profile script's lines) on the host's stderr during the hash check: the cache is
    still reused by hash, never refused as an invalid reply."""
    chatty = tmp_path / "chatty-python"
    chatty.write_text(f"#!/bin/sh\necho 'Welcome to the Ascend box!' >&2\necho 'npu-smi: 4 chips' >&2\n"
                      f"exec {sys.executable} \"$@\"\n")
    chatty.chmod(0o755)
    cache = sshd.cache_dir.parent / "chatty-cache"
    options = {**worker_options, "cache_dir": str(cache)}
    with RemoteBackend(tiny_model_project.pipeline, sshd.target, ssh_options, **options) as backend:
        first = backend.infer(small_dataset / "1" / "image.png")
    uploaded = cached_files(cache)
    options["python"] = str(chatty)  # the hash check runs through the chatty interpreter
    with RemoteBackend(tiny_model_project.pipeline, sshd.target, ssh_options, **options) as backend:
        np.testing.assert_array_equal(backend.infer(small_dataset / "1" / "image.png").probabilities,
                                      first.probabilities)
    assert cached_files(cache) == uploaded  # reused by hash: nothing uploaded again
