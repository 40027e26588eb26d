"""The open backend without Qt (`core.session.inference.Inference`): the viewer's backend lane and `segscope.open`
open a `BackendSpec` through it, the CLI's value, with the CLI's rule for where it runs (`local_where`)."""

from __future__ import annotations

import pytest

from segscope.core.backend_spec import HERE, BackendSpec, Cluster, Devices, local_where
from segscope.core.errors import SegScopeError
from segscope.core.session import inference
from segscope.core.session.inference import Inference


def test_opening_a_spec_closes_the_backend_open_before(tiny_model_project):
    opened = Inference()
    first = opened.open(BackendSpec("embedded", tiny_model_project.card))
    assert first.class_names == ("background", "defect")
    backend = opened.backend
    closed: list[object] = []
    real_close = backend.close
    backend.close = lambda: (closed.append(backend), real_close())  # type: ignore[method-assign]
    opened.open(BackendSpec("embedded", tiny_model_project.card))
    assert closed == [backend] and opened.backend is not backend
    opened.close()
    assert opened.backend is None


def test_a_spec_that_cannot_open_leaves_none_open(tiny_model_project, tmp_path, monkeypatch):
    """The backend open before is closed first (the viewer's state reopens it: `BackendState.failed`)."""
    opened = Inference()
    opened.open(BackendSpec("embedded", tiny_model_project.card))
    def cannot_open(spec: BackendSpec) -> None:
        raise SegScopeError(f"{spec.pipeline}: not found")

    monkeypatch.setattr(inference, "open_backend", cannot_open)
    with pytest.raises(SegScopeError):
        opened.open(BackendSpec("embedded", tmp_path / "missing.json"))
    assert opened.backend is None


@pytest.mark.parametrize(("devices", "cluster", "names", "said"), [
    ("0,1", "tcp://s:8786", ("--devices", "--cluster"), "--cluster cannot be combined with --devices"),
    ("0,1", "tcp://s:8786", ("Devices", "Cluster"), "Cluster cannot be combined with Devices"),
    ("0,0", None, ("Devices", "Cluster"), "Devices: device 0 is listed twice"),
    (None, "s:8786", ("Devices", "Cluster"), "Cluster: expected a scheduler address"),
])
def test_where_a_local_kind_runs_is_refused_in_the_front_ends_names(devices, cluster, names, said):
    with pytest.raises(SegScopeError, match=said):
        local_where(devices, cluster, names=names)


def test_where_a_local_kind_runs():
    assert local_where(None, None) == HERE
    assert local_where("0,2", None) == Devices((0, 2))
    where = local_where(None, "tcp://s:8786")
    assert isinstance(where, Cluster) and where.address == "tcp://s:8786"
