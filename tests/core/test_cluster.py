"""`eval --cluster`: the images as tasks on a real Dask LocalCluster give exactly the local run's output."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from segscope.core.backends.base import InferenceRequest
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.errors import SegScopeError

from helpers import run_cli

distributed = pytest.importorskip("distributed")




def untimed(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if not k.startswith("time_")} for row in rows]


def exported(folder: Path) -> dict[str, object]:
    """Every exported file's bytes; provenance without its creation time, metrics without stage times."""
    files: dict[str, object] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = path.relative_to(folder).as_posix()
        if name.endswith("_provenance.json"):
            files[name] = {k: v for k, v in json.loads(path.read_text()).items() if k != "created"}
        elif name == "metrics.json":
            files[name] = untimed(json.loads(path.read_text())["images"])
        elif name != "metrics.csv":  # the csv holds the stage times
            files[name] = path.read_bytes()
    return files


@pytest.fixture(scope="module")
def threads_cluster():
    """Two in-process workers, one thread each: real scheduler, real task transport, quick to start."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                                  protocol="tcp", host="127.0.0.1") \
            as cluster:
        yield cluster


def test_cluster_run_prints_and_exports_what_the_local_run_does(threads_cluster, tiny_model_project,
                                                                small_dataset, tmp_path, capsys):
    pipeline, address = tiny_model_project.pipeline, threads_cluster.scheduler_address
    outputs = {}
    for name, extra in (("local", []), ("cluster", ["--cluster", address]),
                        ("shipped", ["--cluster", address, "--ship-images"])):
        code, lines = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, *extra)
        assert code == 0, capsys.readouterr().err
        code, document = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--json", *extra)
        assert code == 0, capsys.readouterr().err
        export = tmp_path / name
        code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", pipeline, "--export", export, *extra)
        assert code == 0, capsys.readouterr().err
        parsed = json.loads(document)
        outputs[name] = {"lines": lines, "images": untimed(parsed["images"]), "summary": parsed["summary"],
                         "files": exported(export), "devices": parsed.get("devices")}
    local = outputs.pop("local")
    assert len(local["lines"].splitlines()) == 7 and len(local["files"]) > 4  # 4 images + 3 summary lines
    for name, output in outputs.items():
        for key in ("lines", "images", "summary", "files"):
            assert output[key] == local[key], (name, key)
        workers = output["devices"]
        assert sum(w["images"] for w in workers) == 4 and all(w["name"].startswith("worker ") for w in workers)


@pytest.mark.parametrize(("address", "wanted"), [("foo", "expected a scheduler address"),
                                                  ("tcp://", "expected a scheduler address"),
                                                  ("ssh://a,,b", "expected ssh://HOST")])
def test_bad_cluster_addresses_are_one_line_errors(small_dataset, capsys, address, wanted):
    code, _ = run_cli("eval", "--dataset", small_dataset, "--cluster", address)
    err = capsys.readouterr().err
    assert code == 2 and wanted in err and err.count("\n") == 1


def test_cluster_with_devices_or_shipping_alone_is_refused(small_dataset, capsys):
    code, _ = run_cli("eval", "--dataset", small_dataset, "--cluster", "tcp://127.0.0.1:1", "--devices", "0")
    assert code == 2 and "--cluster cannot be combined with --devices" in capsys.readouterr().err
    code, _ = run_cli("eval", "--dataset", small_dataset, "--ship-images")
    assert code == 2 and "only applies with --cluster" in capsys.readouterr().err


def test_without_distributed_the_error_names_the_extra(small_dataset, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if not installed
    code, _ = run_cli("eval", "--dataset", small_dataset, "--cluster", "tcp://127.0.0.1:8786")
    err = capsys.readouterr().err
    assert code == 2 and 'pip install "segscope[cluster]"' in err and err.count("\n") == 1


def test_a_killed_worker_loses_nothing_and_duplicates_nothing(slow_project, tmp_path, write_png):
    """Two worker processes; one is SIGKILLed while it holds tasks. Every image comes back once, in order.
    The slow model (>= 0.3 s an image) keeps tasks on the workers when the first result is back."""
    from segscope.core.cluster.backend import ClusterBackend

    rng = np.random.default_rng(11)
    images = [write_png(tmp_path / "images" / f"{n}.png", rng.integers(0, 255, (40 + n, 56, 3), dtype=np.uint8))
              for n in range(6)]
    with EmbeddedBackend(slow_project) as local:
        expected = [local.infer(image) for image in images]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  host="127.0.0.1") \
            as cluster, distributed.Client(cluster) as client:
        backend = ClusterBackend(cluster.scheduler_address, "embedded", slow_project, client=client)
        pids = client.run(os.getpid)
        results, killed = [], None
        for result in backend.infer_many(InferenceRequest(image) for image in images):
            results.append(result)
            if killed is None:
                busy = [address for address, keys in client.processing().items() if keys]
                assert busy, "no worker holds a task to lose"
                killed = pids[busy[0]]
                os.kill(killed, signal.SIGKILL)
        backend.close()
        assert killed not in client.run(os.getpid).values()  # that worker process is gone (its nanny restarts one)
    assert len(results) == len(images)
    for got, want in zip(results, expected):
        assert got.image_size == want.image_size and got.roi == want.roi
        np.testing.assert_array_equal(got.argmax, want.argmax)
        np.testing.assert_allclose(got.probabilities, want.probabilities, rtol=0, atol=1e-6)
    assert sum(row["images"] for row in backend.usage.as_dicts()) == len(images)


def test_segscope_errors_on_a_worker_arrive_as_one_line(threads_cluster, tiny_model_project, tmp_path):
    from segscope.core.cluster.backend import ClusterBackend

    with ClusterBackend(threads_cluster.scheduler_address, "embedded", tiny_model_project.pipeline) as backend:
        broken = tmp_path / "broken.png"
        broken.write_bytes(b"\x89PNG\r\n\x1a\n and nothing else")
        with pytest.raises(SegScopeError, match="broken.png"):
            list(backend.infer_many([InferenceRequest(broken)]))


def test_task_resources_keep_every_image_on_the_workers_that_declare_them(tiny_model_project, small_dataset,
                                                                          capsys):
    """One worker declares NPU=1, the other nothing: with --task-resources NPU=1 only the first runs images."""
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                                  protocol="tcp", host="127.0.0.1", resources={"NPU": 1}) as cluster:
        cluster.worker_spec["plain"] = {"cls": distributed.Worker, "options": {"nthreads": 1, "host": "127.0.0.1"}}
        cluster.sync(cluster._correct_state)
        with distributed.Client(cluster) as client:
            client.wait_for_workers(2, timeout=30)
            declared = {w["name"] for w in client.scheduler_info()["workers"].values() if w.get("resources")}
        assert len(declared) == 1
        code, document = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline,
                                 "--json", "--cluster", cluster.scheduler_address, "--task-resources", "NPU=1")
        assert code == 0, capsys.readouterr().err
        # every worker is listed; the one without the resource ran nothing
        assert sorted((w["name"], w["images"]) for w in json.loads(document)["devices"]) == \
            sorted([(f"worker {declared.pop()}", 4), ("worker plain", 0)])


@pytest.mark.parametrize("text", ["NPU", "NPU=0", "NPU=x", "=1", "NPU=1,NPU=2"])
def test_bad_task_resources_are_one_line_errors(small_dataset, capsys, text):
    code, _ = run_cli("eval", "--dataset", small_dataset, "--cluster", "tcp://127.0.0.1:1", f"--task-resources={text}")
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("segscope: error: --task-resources") and err.count("\n") == 1


def test_a_cancelled_run_leaves_no_task_behind_and_the_next_run_works(threads_cluster, tiny_model_project,
                                                                      tmp_path, write_png):
    import threading
    import time

    from segscope.core.cluster.backend import ClusterBackend
    from segscope.core.dataset.dataset import Dataset
    from segscope.core.errors import CancelledError
    from segscope.core.evaluate import evaluate_dataset

    rng = np.random.default_rng(2)
    for n in range(8):
        write_png(tmp_path / "data" / str(n) / "image.png", rng.integers(0, 255, (50, 70, 3), dtype=np.uint8))
    dataset = Dataset.open(tmp_path / "data")
    with ClusterBackend(threads_cluster.scheduler_address, "embedded", tiny_model_project.pipeline) as backend:
        cancel = threading.Event()
        seen = []
        with pytest.raises(CancelledError):
            for evaluation in evaluate_dataset(backend, dataset, cancel=cancel):
                seen.append(evaluation.item.id)
                cancel.set()
        assert len(seen) == 1

        def tasks_left() -> int:
            return int(backend.client.run_on_scheduler(
                lambda dask_scheduler: sum(k.startswith("segscope-infer-") for k in dask_scheduler.tasks)))

        deadline = time.monotonic() + 30  # the scheduler forgets cancelled tasks asynchronously
        while tasks_left() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tasks_left() == 0
        assert len(list(evaluate_dataset(backend, dataset))) == 8  # the backend still runs a fresh run
