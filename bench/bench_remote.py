"""Benchmark of the remote backend: `segscope eval` locally vs over SSH on loopback, and bytes per image.

Run: `python bench/bench_remote.py [--images 4] [--rounds 3] [--pipeline P]` (needs /usr/sbin/sshd; a few
minutes). It starts a throwaway sshd on 127.0.0.1 (the test suite's launcher), generates demo slides, and
runs the eval loop (core.evaluate.evaluate_dataset, overlapped as `segscope eval` runs it) through the
embedded backend here and through the remote backend (the real worker, embedded backend on the "host"):
with each probability encoding, and for float32 also with the whole file uploaded instead of the ROI crop.
All variants run interleaved (A B C ... A B C ...); each prints its median and spread per image, the ratio
to local, the bytes sent and received per image, and whether its metrics are identical to the local run's.
On loopback, client and "host" share this machine's cores: a real host adds its own cores and the link's
latency and bandwidth (bytes / bandwidth).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import timing
from timing import interleaved

from segscope.core.backends.base import Backend
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.dataset.dataset import Dataset
from segscope.core.dataset.demo import generate_demo_dataset
from segscope.core.errors import SegScopeError
from segscope.core.evaluate import evaluate_dataset
from segscope.core.profiling.machine import cpu_name
from segscope.core.remote.backend import RemoteBackend
from segscope.core.remote.connection import SshOptions
from segscope.core.remote.protocol import PROBABILITY_DTYPES
from segscope.core.stream.pipeline import DEFAULT_PIPELINE

RAW_FLOAT32 = 960 * 960 * 2 * 4 + 960 * 960 * 4  # softmax + int32 argmax, as the SDK hands them over


def spread(values: list[float]) -> str:
    return timing.spread(values, 1000.0, "ms", 1)


def load_sshd_launcher() -> ModuleType:
    """The test suite's sshd launcher, tests/remote/sshd.py, loaded by path (tests/ is not a package)."""
    path = Path(__file__).resolve().parents[1] / "tests" / "remote" / "sshd.py"
    spec = importlib.util.spec_from_file_location("sshd", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]  # its dataclass looks its module up there
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
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
    print(f"Machine: {cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} (1 min) before; "
          "client, sshd and the \"host\" worker share these cores")
    generate_demo_dataset(folder / "data", count=args.images, seed=1)
    dataset = Dataset.open(folder / "data")
    first = dataset.items[0]
    print(f"{len(dataset)} demo slides ({first.image_path.stat().st_size / 1e6:.1f} MB PNG each, ROI "
          f"{dataset.roi_for(first)}), pipeline {args.pipeline}; raw float32 result {RAW_FLOAT32 / 1e6:.2f} MB")
    known_hosts = folder / "known_hosts"
    known_hosts.write_text(sshd.known_hosts_line())  # type: ignore[attr-defined]
    ssh = SshOptions(key_filename=sshd.user_key, allow_agent=False, look_for_keys=False,  # type: ignore[attr-defined]
                     ssh_config=None, known_hosts=known_hosts)
    with contextlib.ExitStack() as stack:
        backends: dict[str, Backend] = {"local": stack.enter_context(EmbeddedBackend(args.pipeline))}
        for dtype, crop in [(d, True) for d in reversed(PROBABILITY_DTYPES)] + [("float32", False)]:
            name = f"remote {dtype}" + (" crop" if crop else " file")
            backends[name] = stack.enter_context(RemoteBackend(
                args.pipeline, sshd.target, ssh, python=sys.executable,  # type: ignore[attr-defined]
                cache_dir=str(folder / "host-cache"), worker_backend="embedded", probabilities=dtype,
                crop_upload=crop))
        metrics: dict[str, list[object]] = {}
        traffic: dict[str, tuple[int, int]] = {}

        def variant(name: str, backend: Backend) -> Callable[[], object]:
            def evaluate() -> None:
                remote = backend if isinstance(backend, RemoteBackend) else None
                before = (remote.session.bytes_sent, remote.session.bytes_received) if remote and remote.session \
                    else (0, 0)
                metrics[name] = [e.metrics for e in evaluate_dataset(backend, dataset)]
                if remote is not None and remote.session is not None:
                    after = (remote.session.bytes_sent, remote.session.bytes_received)
                    traffic[name] = (after[0] - before[0], after[1] - before[1])
            return evaluate

        times = interleaved({name: variant(name, b) for name, b in backends.items()}, args.rounds)

        def whole_command(remote: bool) -> Callable[[], object]:
            """What `segscope eval` does besides parsing: open the backend (remote: connect, check the host
            cache, start the worker), run the loop, close."""
            def command() -> None:
                opened: Backend = RemoteBackend(
                    args.pipeline, sshd.target, ssh, python=sys.executable,  # type: ignore[attr-defined]
                    cache_dir=str(folder / "host-cache"), worker_backend="embedded") if remote \
                    else EmbeddedBackend(args.pipeline)
                with opened:
                    list(evaluate_dataset(opened, dataset))
            return command

        commands = interleaved({"local": whole_command(False), "remote": whole_command(True)}, args.rounds)
    n = len(dataset)
    local = statistics.median(times["local"])
    print(f"eval loop, interleaved x{args.rounds}, seconds per image:")
    for name, values in times.items():
        line = f"  {name:<20} {spread([v / n for v in values])}  {statistics.median(values) / local:5.2f}x local"
        if name in traffic:
            sent, received = (v / n for v in traffic[name])
            worst = max(abs(a.soft_dice - b.soft_dice)  # type: ignore[attr-defined]
                        for a, b in zip(metrics[name], metrics["local"]))
            line += (f"; sent {sent / 1e6:.2f} MB, received {received / 1e6:.3f} MB per image; metrics "
                     f"{'identical to local' if metrics[name] == metrics['local'] else 'differ'}, "
                     f"max |soft Dice - local| {worst:.1e}")
        print(line)
    print(f"whole command (open the backend, the eval loop, close), interleaved x{args.rounds}:")
    for name, values in commands.items():
        print(f"  {name:<20} {spread(values)}")
    whole = [r / loc for r, loc in zip(commands["remote"], commands["local"])]
    print(f"  remote / local: median {statistics.median(whole):.2f}x (min {min(whole):.2f}, max {max(whole):.2f}); "
          "goal <= 1.2x")
    print(f"Load average {os.getloadavg()[0]:.2f} (1 min) after the run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
