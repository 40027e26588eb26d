"""Scale-out benchmark: images/s for one vs two devices (`--devices`) and one vs two Dask workers (`--cluster`),
and the scheduling overhead per cluster task.

Run: `python bench/bench_scale.py [--images 8] [--rounds 3]` (about a minute on 2 cores). The shipped demo model
on small synthetic images (320x240, whole-image ROI, resized to the model's 960x960), so the model dominates.
Variants run interleaved, round by round, so a load change hits each alike; figures are medians (min, max).
A ratio near 2 needs two idle cores per worker pair: with ONNX Runtime already using every core in one session,
two sessions or workers on the same cores can only share them, and the ratio measures that sharing.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
from timing import spread

from segscope.core.backends.base import Backend, InferenceRequest
from segscope.core.backends.embedded import EmbeddedBackend, open_on_devices
from segscope.core.profiling.machine import cpu_name
from segscope.core.stream.pipeline import DEFAULT_PIPELINE


def write_images(folder: Path, count: int) -> list[Path]:
    rng = np.random.default_rng(0)
    paths = []
    for n in range(count):
        path = folder / f"{n}.png"
        cv2.imwrite(str(path), rng.integers(0, 255, (240, 320, 3), dtype=np.uint8))
        paths.append(path)
    return paths


def images_per_s(backend: Backend, images: list[Path]) -> float:
    start = time.perf_counter()
    count = sum(1 for _ in backend.infer_many(InferenceRequest(path) for path in images))
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import distributed

    from segscope.core.cluster.backend import ClusterBackend

    logging.getLogger("distributed").setLevel(logging.ERROR)  # the in-process scheduler's shutdown chatter
    cores = os.cpu_count() or 1
    print(f"Machine: {cpu_name()}; load average {os.getloadavg()[0]:.2f} (1 min) before the run")
    with tempfile.TemporaryDirectory() as tmp:
        images = write_images(Path(tmp), args.images)
        clusters = [distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                             dashboard_address=":0", host="127.0.0.1", silence_logs=logging.ERROR)
                    for n in (1, 2)]
        try:
            variants: dict[str, Backend] = {
                f"1 session ({cores} ORT threads)": EmbeddedBackend(DEFAULT_PIPELINE),
                f"--devices 0,1 (2 sessions x {max(1, cores // 2)} threads)": open_on_devices(DEFAULT_PIPELINE,
                                                                                                (0, 1)),
                "--cluster, 1 worker process": ClusterBackend(clusters[0].scheduler_address, "embedded",
                                                              DEFAULT_PIPELINE),
                "--cluster, 2 worker processes": ClusterBackend(clusters[1].scheduler_address, "embedded",
                                                                DEFAULT_PIPELINE),
            }
            for backend in variants.values():  # warm-up: each worker opens its backend on its first task
                images_per_s(backend, images[:2])
            rates: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(args.rounds):
                for name, backend in variants.items():
                    rates[name].append(images_per_s(backend, images))
            print(f"\nimages/s over {args.images} images of 320x240 -> 960x960, interleaved x{args.rounds}:")
            for name, values in rates.items():
                print(f"  {name:44} {spread(values, unit='images/s')}")
            names = list(variants)
            ratio: Callable[[int, int], float] = lambda a, b: \
                statistics.median(rates[names[a]]) / statistics.median(rates[names[b]])  # noqa: E731
            print(f"  2 sessions / 1 session = {ratio(1, 0):.2f}x; 2 workers / 1 worker = {ratio(3, 2):.2f}x; "
                  f"1 worker / local session = {ratio(2, 0):.2f}x")
            for backend in variants.values():
                backend.close()
            with distributed.Client(clusters[1]) as client:
                tasks = 200
                client.gather(client.map(int, range(20), pure=False))  # warm-up
                per_task = []
                for _ in range(args.rounds):
                    start = time.perf_counter()
                    client.gather(client.map(int, range(tasks), pure=False))
                    per_task.append((time.perf_counter() - start) / tasks * 1000)
                print(f"\nScheduling overhead, {tasks} no-op tasks on 2 workers, per task: "
                      f"{spread(per_task, unit='ms')}")
        finally:
            for cluster in clusters:
                cluster.close()
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) after the run")


if __name__ == "__main__":
    main()
