"""Benchmark of the remote backend: local vs remote-over-loopback time per image, and bytes per result.

Run: `python bench/bench_remote.py [--images 4] [--pipeline P]` (needs /usr/sbin/sshd; about a minute).
It starts a throwaway sshd on 127.0.0.1 (the test suite's launcher), generates demo slides, and runs the
same images at their default ROI through the embedded backend here and through the remote backend over
SSH (the real worker, embedded backend on the "host"), once per probability encoding. Every figure is
measured in this one run and printed as a median or a ratio:

- time per image: local, remote, and the ratio remote/local (loopback: the remote overhead is SSH
  crypto, the upload of the encoded slide, result encoding/decoding; a real link adds its latency and
  bandwidth: bytes / bandwidth);
- bytes per image: the request (the PNG) and the result frame, against 7.4 MB of raw float32;
- the remote per-stage medians (upload, remote stages, download).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.backends.remote import RemoteBackend
from segscope.core.dataset import Dataset
from segscope.core.demo_data import generate_demo_dataset
from segscope.core.errors import SegScopeError
from segscope.core.fileio import read_bytes
from segscope.core.pipeline import DEFAULT_PIPELINE
from segscope.core.remote.connection import SshOptions
from segscope.core.remote.protocol import PROBABILITY_DTYPES

RAW_FLOAT32 = 960 * 960 * 2 * 4 + 960 * 960 * 4  # softmax + int32 argmax, as the SDK hands them over


def load_sshd_launcher() -> ModuleType:
    """The test suite's sshd launcher, tests/remote/sshd.py, loaded by path (tests/ is not a package)."""
    path = Path(__file__).resolve().parents[1] / "tests" / "remote" / "sshd.py"
    spec = importlib.util.spec_from_file_location("sshd", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]  # its dataclass looks its module up there
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def timed(run: object, inputs: list) -> list[float]:
    """Seconds per call of `run(image, roi)` over `inputs`, after one warm-up call."""
    run(*inputs[0])  # type: ignore[operator]
    times = []
    for image, roi in inputs:
        start = time.perf_counter()
        run(image, roi)  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--pipeline", type=Path, default=DEFAULT_PIPELINE)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="segscope-bench-remote-") as tmp:
        folder = Path(tmp)
        launcher = load_sshd_launcher()
        try:
            sshd = launcher.start_sshd(folder)
        except launcher.SshdUnavailable as exc:
            print(f"skipped: {exc}")
            return 0
        try:
            return run(args, folder, sshd)
        except SegScopeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        finally:
            sshd.stop()


def run(args: argparse.Namespace, folder: Path, sshd: object) -> int:
    generate_demo_dataset(folder / "data", count=args.images, seed=1)
    dataset = Dataset.open(folder / "data")
    inputs = [(read_bytes(item.image_path), dataset.roi_for(item)) for item in dataset.items]
    print(f"{len(inputs)} demo slides ({len(inputs[0][0]) / 1e6:.1f} MB PNG each, ROI {inputs[0][1]}), "
          f"pipeline {args.pipeline}")
    with EmbeddedBackend(args.pipeline) as local:
        local_s = statistics.median(timed(local.infer, inputs))
    print(f"local embedded: {local_s * 1000:.0f} ms/image")
    known_hosts = folder / "known_hosts"
    known_hosts.write_text(sshd.known_hosts_line())  # type: ignore[attr-defined]
    ssh = SshOptions(key_filename=sshd.user_key, allow_agent=False, look_for_keys=False,  # type: ignore[attr-defined]
                     ssh_config=None, known_hosts=known_hosts)
    for dtype in PROBABILITY_DTYPES:
        opened = time.perf_counter()
        with RemoteBackend(args.pipeline, sshd.target, ssh, python=sys.executable,  # type: ignore[attr-defined]
                           cache_dir=str(folder / "host-cache"), worker_backend="embedded",
                           probabilities=dtype) as remote:
            open_s = time.perf_counter() - opened
            transfers: list[tuple[int, int]] = []
            stages: list[dict[str, float]] = []

            def infer(image: bytes, roi: object, remote: RemoteBackend = remote, stages: list = stages,
                      transfers: list = transfers) -> None:
                stages.append(remote.infer(image, roi).timings)  # type: ignore[arg-type]
                transfers.append(remote.last_transfer)

            remote_s = statistics.median(timed(infer, inputs))
        sent = statistics.median(t[0] for t in transfers)
        received = statistics.median(t[1] for t in transfers)
        print(f"remote {dtype:>7}: {remote_s * 1000:.0f} ms/image, ratio remote/local {remote_s / local_s:.2f}; "
              f"request {sent / 1e6:.2f} MB, result {received / 1e6:.3f} MB per image "
              f"({RAW_FLOAT32 / received:.0f}x smaller than raw float32); first open {open_s:.1f} s")
        names = sorted({k for t in stages for k in t}, key=lambda k: list(stages[0]).index(k) if k in stages[0] else 99)
        print("    stages (median ms): " + ", ".join(
            f"{k} {statistics.median(t.get(k, 0.0) for t in stages) * 1000:.1f}" for k in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
