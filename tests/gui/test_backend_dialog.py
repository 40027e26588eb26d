"""The connection dialog: testing a backend, one-line errors, host-key confirmation, saved profiles."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from segscope.core.backend_choice import BackendChoice
from segscope.core.backend_spec import BackendSpec, RemoteHost
from segscope.core.backends.base import Backend, Capabilities
from segscope.core.remote.connection import UnknownHostKey
from segscope.core.stream.pipeline import DEFAULT_PIPELINE
from segscope.gui.dialogs import backend_dialog
from segscope.gui.dialogs.backend_dialog import BackendDialog

pytestmark = pytest.mark.gui


def test_testing_the_embedded_backend_shows_its_device(qtbot, tiny_model_project, jobs):
    dialog = BackendDialog(BackendChoice(pipeline=tiny_model_project.pipeline), jobs)
    qtbot.addWidget(dialog)
    assert dialog.kind() == "embedded" and not dialog.remote_box.isEnabled()
    dialog.test_connection()
    qtbot.waitUntil(lambda: dialog.status_label.text().startswith("OK"), timeout=20000)
    assert "embedded on CPU (ONNX Runtime" in dialog.status_label.text()


def test_a_broken_pipeline_is_one_line_naming_the_file(qtbot, tmp_path, jobs):
    bad = tmp_path / "bad.pipeline"
    bad.write_text("{ not json", encoding="utf-8")
    dialog = BackendDialog(BackendChoice(), jobs)
    qtbot.addWidget(dialog)
    dialog.pipeline_edit.setText(str(bad))
    dialog.test_connection()
    qtbot.waitUntil(lambda: dialog.status_label.text() not in ("", "Connecting…"), timeout=20000)
    text = dialog.status_label.text()
    assert str(bad) in text and "\n" not in text and "Traceback" not in text


class _Stub(Backend):
    capabilities = Capabilities("remote", "tester@ascend: embedded", (960, 960), ("background", "defect"))

    def infer(self, image, roi=None):
        raise AssertionError("not used")

    def close(self) -> None:
        pass


def test_unknown_host_key_is_trusted_only_after_confirmation(qtbot, monkeypatch, tmp_path, jobs):
    offered = "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"
    attempts: list[str] = []

    def fake_open(spec: BackendSpec) -> Backend:  # what opening a remote host does for a new one
        assert isinstance(spec.where, RemoteHost)
        accepted = spec.where.login.accept_new_host_key or ""
        attempts.append(str(accepted))
        if accepted != offered:
            raise UnknownHostKey("ascend.example", "ssh-ed25519", offered, tmp_path / "known_hosts")
        return _Stub()

    asked: list[tuple[str, str]] = []
    answers = iter([False, True])

    def fake_confirm(_parent: object, host: str, fingerprint: str) -> bool:
        asked.append((host, fingerprint))
        return next(answers)

    monkeypatch.setattr(backend_dialog, "open_backend", fake_open)
    monkeypatch.setattr(backend_dialog, "confirm_host_key", fake_confirm)
    dialog = BackendDialog(BackendChoice(), jobs)
    qtbot.addWidget(dialog)
    dialog.radios["remote"].setChecked(True)
    assert dialog.remote_box.isEnabled()
    dialog.host_edit.setText("ascend.example")
    dialog.user_edit.setText("tester")

    dialog.test_connection()  # first time the user says no: nothing is trusted
    qtbot.waitUntil(lambda: "unknown host key" in dialog.status_label.text(), timeout=10000)
    assert attempts == [""] and dialog.choice().accepted_fingerprint == ""

    dialog.test_connection()  # then yes: the retry trusts exactly the fingerprint shown
    qtbot.waitUntil(lambda: dialog.status_label.text().startswith("OK"), timeout=10000)
    assert attempts == ["", "", offered]
    assert asked == [("ascend.example", offered)] * 2
    assert dialog.choice().accepted_fingerprint == offered
    assert dialog.choice().target == "tester@ascend.example:22"


def test_profile_round_trip_never_keeps_the_password(isolated_settings):
    from segscope.gui.runtime import settings

    choice = BackendChoice("remote", DEFAULT_PIPELINE, "10.0.0.5", 2222, "hw", "~/.ssh/id_ed25519",
                           "/usr/local/sdk_home/mxManufacture", password="secret")
    settings.save_backend_profile(choice.as_profile())
    stored = settings.backend_profile()
    assert "secret" not in str(stored) and "password" not in stored
    again = BackendChoice.from_profile(stored)
    assert again == BackendChoice("remote", DEFAULT_PIPELINE, "10.0.0.5", 2222, "hw", "~/.ssh/id_ed25519",
                                  "/usr/local/sdk_home/mxManufacture")
    assert again.set_env == "/usr/local/sdk_home/mxManufacture/set_env.sh"
    assert BackendChoice.from_profile({"kind": "embedded", "pipeline": "/gone.pipeline"}).pipeline == DEFAULT_PIPELINE


def test_each_backend_of_the_registry_is_offered_when_this_machine_has_it(qtbot, monkeypatch, jobs):
    missing = {"mindx": "MindX SDK not found", "ais-bench": "ais_bench not found"}
    monkeypatch.setattr(backend_dialog, "unavailable", lambda kind: missing.get(kind, ""))
    dialog = BackendDialog(BackendChoice(kind="mindx"), jobs)
    qtbot.addWidget(dialog)
    assert list(dialog.radios) == ["embedded", "mindx", "mindx-model", "ais-bench", "remote"]
    assert not dialog.radios["mindx"].isEnabled() and dialog.kind() == "embedded"
    assert dialog.radios["ais-bench"].toolTip() == "ais_bench not found; or use the remote option"
    model_api = dialog.radios["mindx-model"]
    assert model_api.isEnabled() and model_api.text().startswith("MindX Model API")
    assert Path(dialog.choice().pipeline) == DEFAULT_PIPELINE
    dialog.radios["mindx-model"].setChecked(True)
    assert dialog.choice().describe() == "MindX Model API (this host)" and dialog.scale_box.isEnabled()


def test_a_model_card_runs_without_a_pipeline(qtbot, tiny_model_project, jobs):
    dialog = BackendDialog(BackendChoice(), jobs)
    qtbot.addWidget(dialog)
    dialog.pipeline_edit.setText(str(tiny_model_project.card))
    dialog.test_connection()
    qtbot.waitUntil(lambda: dialog.status_label.text().startswith("OK"), timeout=20000)
    assert BackendChoice.from_profile(dialog.choice().as_profile()).pipeline == tiny_model_project.card


@pytest.mark.parametrize(("key", "saved"), [
    ("port", "²"), ("port", "0"), ("port", "65536"), ("port", "-22"), ("port", " 22"), ("port", ""),
    ("kind", "gpu"), ("pipeline", "/nowhere/x.pipeline"), ("pipeline", "a\0b"), ("devices", "0,0"),
    ("devices", "²"), ("cluster", "scheduler:8786")])
def test_a_bad_saved_value_falls_back_to_its_default(qtbot, isolated_settings, key, saved, jobs):
    from segscope.gui.runtime import settings

    good = BackendChoice("remote", DEFAULT_PIPELINE, "ascend", 2200, "hw")
    settings.save_backend_profile({**good.as_profile(), key: saved})
    restored = BackendChoice.from_profile(settings.backend_profile())
    assert restored == dataclasses.replace(good, **{key: getattr(BackendChoice(), key)})
    dialog = BackendDialog(restored, jobs)  # and the dialog opens on it
    qtbot.addWidget(dialog)
    assert dialog.port_spin.value() == restored.port


@pytest.mark.parametrize(("devices", "cluster", "wanted"), [
    ("0,0", "", "Devices: device 0 is listed twice"),
    ("a,b", "", "Devices: expected comma-separated device ids"),
    ("", "scheduler:8786", "expected a scheduler address"),
    ("0,1", "tcp://h:8786", "Cluster cannot be combined with Devices")])
def test_bad_devices_or_cluster_keep_the_dialog_open_with_one_line(qtbot, devices, cluster, wanted, jobs):
    dialog = BackendDialog(BackendChoice(), jobs)
    qtbot.addWidget(dialog)
    dialog.devices_edit.setText(devices)
    dialog.cluster_edit.setText(cluster)
    dialog.accept()
    assert dialog.result() != BackendDialog.DialogCode.Accepted
    text = dialog.status_label.text()
    assert wanted in text and "\n" not in text


def test_devices_and_cluster_are_remembered_and_apply_to_local_backends_only(qtbot, isolated_settings, jobs):
    from segscope.gui.runtime import settings

    choice = BackendChoice("embedded", DEFAULT_PIPELINE, devices="0,1", cluster="")
    settings.save_backend_profile(choice.as_profile())
    assert BackendChoice.from_profile(settings.backend_profile()) == choice
    assert choice.describe() == "embedded (this machine), devices 0,1"
    dialog = BackendDialog(BackendChoice("remote", DEFAULT_PIPELINE, "ascend", cluster="ssh://a,b"), jobs)
    qtbot.addWidget(dialog)
    assert not dialog.scale_box.isEnabled()  # the remote host runs one stream
    dialog.radios["embedded"].setChecked(True)
    assert dialog.scale_box.isEnabled() and dialog.choice().cluster == "ssh://a,b"


def test_a_wrong_file_is_said_for_what_it_is_and_a_card_naming_an_onnx_is_taken(qtbot, jobs, tiny_model_project):
    """The CLI's rule (core.stream.source.resolve_source): an AIPP config is said to be one; an .onnx that only a
    card of another name describes is replaced by that card, said, and taken on the second OK."""
    dialog = BackendDialog(BackendChoice(), jobs)
    qtbot.addWidget(dialog)
    aipp = tiny_model_project.root / "models" / "aipp_unet_simple_opencv.cfg"
    dialog.pipeline_edit.setText(str(aipp))
    dialog.accept()
    assert dialog.result() != dialog.DialogCode.Accepted
    assert dialog.status_label.text() == (f"{aipp}: is an AIPP config (a model card names it), not a pipeline or "
                                          "model: give a .pipeline file, a model card (.json), an .onnx or .om with "
                                          "its card, or a model project folder")
    dialog.pipeline_edit.setText(str(tiny_model_project.onnx))  # tiny.onnx: unet_hw960_bs1.json names it
    dialog.accept()
    assert dialog.result() != dialog.DialogCode.Accepted
    assert dialog.pipeline_edit.text() == str(tiny_model_project.card)
    assert "has no card of its own name (tiny.json)" in dialog.status_label.text()
    dialog.accept()
    assert dialog.result() == dialog.DialogCode.Accepted and dialog.choice().pipeline == tiny_model_project.card
