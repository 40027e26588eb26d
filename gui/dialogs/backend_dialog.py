"""The connection dialog: which backend runs the stream (each kind of `core.backends.registry` this machine has,
or a remote host over SSH), on a pipeline or a model card; what it picked is a `core.backend_choice.BackendChoice`,
kept as a profile and opened as a `core.backend_spec.BackendSpec`.

A remote host whose key is not yet known is only trusted after the user accepts its fingerprint in a
confirmation dialog; passwords are never stored (the profile keeps host, port, user, key file, SDK path).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from PySide6.QtWidgets import (
    QButtonGroup,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from ...core.backend_choice import KINDS, BackendChoice
from ...core.backend_spec import open_backend
from ...core.backends.base import Backend, Capabilities
from ...core.backends.registry import BACKENDS, CHOSEN_KINDS
from ...core.errors import SegScopeError
from ...core.stream.source import resolve_source
from ..runtime.jobs import Job, Jobs, describe_error

REMOTE_LABEL = "Remote Ascend host over SSH"
SOURCE_FILTER = "Pipelines and model cards (*.pipeline *.json *.om *.onnx);;All files (*)"


def unavailable(kind: str) -> str:
    """Why a local kind cannot run on this machine ("" when it can; the registry's check)."""
    return BACKENDS[kind].available()[1]


def unknown_host_fingerprint(exc: BaseException) -> str | None:
    """The fingerprint of the remote backend's `UnknownHostKey` error (None for any other error)."""
    if type(exc).__name__ != "UnknownHostKey":  # by name: paramiko is imported only when remote is used
        return None
    return str(getattr(exc, "fingerprint", ""))


def probe(open_fn: Callable[[], Backend]) -> tuple[Capabilities | None, Exception | None]:
    """Open and close a backend (on a worker): its capabilities, or the error that stopped it (the dialog
    words it, and asks about an unknown host key)."""
    try:
        with open_fn() as backend:
            return backend.capabilities, None
    except Exception as exc:  # noqa: BLE001 - shown in the dialog
        return None, exc


def confirm_host_key(parent: QWidget | None, host: str, fingerprint: str) -> bool:
    """Ask the user whether to trust a host seen for the first time (default: no)."""
    box = QMessageBox(parent)
    box.setIcon(QMessageBox.Icon.Warning)
    box.setWindowTitle("Unknown host key")
    box.setText(f"The authenticity of host {host} can't be established.")
    box.setInformativeText(f"Its key fingerprint is:\n{fingerprint}\n\nCompare it with the one your administrator "
                           "gave you. Trust this host and remember its key in known_hosts?")
    box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
    box.setDefaultButton(QMessageBox.StandardButton.No)
    return box.exec() == QMessageBox.StandardButton.Yes


class BackendDialog(QDialog):
    """Pick a backend; `choice()` after `exec()` returns what was chosen (tested or not)."""

    def __init__(self, current: BackendChoice, jobs: Jobs, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Backend connection")
        self.jobs = jobs
        self._probe: Job | None = None
        self._accepted_fingerprint = current.accepted_fingerprint

        self.buttons_group = QButtonGroup(self)
        self.radios: dict[str, QRadioButton] = {}
        labels = {**{kind: BACKENDS[kind].label for kind in CHOSEN_KINDS}, "remote": REMOTE_LABEL}
        kinds_box = QGroupBox("Run the stream with")
        kinds_layout = QVBoxLayout(kinds_box)
        for kind in KINDS:
            radio = QRadioButton(labels[kind])
            self.radios[kind] = radio
            self.buttons_group.addButton(radio)
            kinds_layout.addWidget(radio)
        for kind in CHOSEN_KINDS:
            why = unavailable(kind)
            if why:
                self.radios[kind].setEnabled(False)
                self.radios[kind].setToolTip(f"{why}; or use the remote option")

        self.pipeline_edit = QLineEdit(str(current.pipeline))
        self.pipeline_edit.setToolTip("A MindX .pipeline file (its modelPath resolved from its project root), or a "
                                      "model card (or the .om/.onnx beside one) to run without a pipeline: its .onnx "
                                      "on the embedded backend, its .om on the Model API or ais_bench")

        pipeline_row = QHBoxLayout()
        pipeline_row.addWidget(self.pipeline_edit, 1)
        browse = QPushButton("…")
        browse.setToolTip("Choose a .pipeline file or a model card")
        browse.clicked.connect(self._browse_pipeline)
        pipeline_row.addWidget(browse)

        self.remote_box = QGroupBox("SSH profile")
        form = QFormLayout(self.remote_box)
        self.host_edit = QLineEdit(current.host)
        self.host_edit.setPlaceholderText("ascend-host or an alias from ~/.ssh/config")
        self.port_spin = QSpinBox()
        self.port_spin.setRange(1, 65535)
        self.port_spin.setValue(current.port)
        self.user_edit = QLineEdit(current.user)
        self.key_edit = QLineEdit(current.key_file)
        self.key_edit.setPlaceholderText("empty: ssh-agent / default keys")
        key_row = QHBoxLayout()
        key_row.addWidget(self.key_edit, 1)
        key_browse = QPushButton("…")
        key_browse.clicked.connect(self._browse_key)
        key_row.addWidget(key_browse)
        self.password_edit = QLineEdit(current.password)
        self.password_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.password_edit.setPlaceholderText("only if no key works; kept in memory, never saved")
        self.sdk_edit = QLineEdit(current.sdk_path)
        self.sdk_edit.setPlaceholderText("MindX SDK folder on the host (its set_env.sh is sourced); empty: none")
        form.addRow("Host", self.host_edit)
        form.addRow("Port", self.port_spin)
        form.addRow("User", self.user_edit)
        form.addRow("Key file", key_row)
        form.addRow("Password", self.password_edit)
        form.addRow("SDK path", self.sdk_edit)

        self.scale_box = QGroupBox("Scale out (the backends on this machine)")
        scale_form = QFormLayout(self.scale_box)
        self.devices_edit = QLineEdit(current.devices)
        self.devices_edit.setPlaceholderText("empty: one stream; e.g. 0,1,2,3: one stream per device")
        self.devices_edit.setToolTip("One stream per device id, each image to the first free one (as --devices); "
                                     "on the embedded backend the ids name ONNX Runtime sessions")
        self.cluster_edit = QLineEdit(current.cluster)
        self.cluster_edit.setPlaceholderText("empty: this machine; tcp://scheduler:8786 or ssh://host1,host2")
        self.cluster_edit.setToolTip("Run the images as tasks on a Dask cluster (as --cluster): a running "
                                     "scheduler's address, or hosts to start one on over SSH (same Python and "
                                     "packages on every node)")
        scale_form.addRow("Devices", self.devices_edit)
        scale_form.addRow("Cluster", self.cluster_edit)

        self.test_button = QPushButton("Test connection")
        self.test_button.setToolTip("Open the backend once and show its device, without keeping it")
        self.test_button.clicked.connect(self.test_connection)
        self.status_label = QLabel("")
        self.status_label.setWordWrap(True)
        test_row = QHBoxLayout()
        test_row.addWidget(self.test_button)
        test_row.addWidget(self.status_label, 1)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addWidget(kinds_box)
        pipeline_form = QFormLayout()
        pipeline_form.addRow("Pipeline or model", pipeline_row)
        layout.addLayout(pipeline_form)
        layout.addWidget(self.remote_box)
        layout.addWidget(self.scale_box)
        layout.addLayout(test_row)
        layout.addWidget(buttons)

        self.buttons_group.buttonToggled.connect(lambda *_: self._update_enabled())
        radio = self.radios[current.kind] if self.radios[current.kind].isEnabled() else self.radios["embedded"]
        radio.setChecked(True)
        self._update_enabled()
        self.resize(560, 0)

    def kind(self) -> str:
        return next(k for k, r in self.radios.items() if r.isChecked())

    def choice(self) -> BackendChoice:
        return BackendChoice(self.kind(), Path(self.pipeline_edit.text().strip()), self.host_edit.text().strip(),
                             self.port_spin.value(), self.user_edit.text().strip(), self.key_edit.text().strip(),
                             self.sdk_edit.text().strip(), self._accepted_fingerprint, self.password_edit.text(),
                             self.devices_edit.text().strip(), self.cluster_edit.text().strip())

    def _update_enabled(self) -> None:
        self.remote_box.setEnabled(self.kind() == "remote")
        self.scale_box.setEnabled(self.kind() != "remote")

    def settled(self) -> bool:
        """Whether the fields are ones the CLI would take (else the status says why). The pipeline or model
        field is settled by the CLI's rule (`resolve_source`) on what will open; where that needs saying (a card
        of another name for an .onnx, a folder of several pipelines) the status says it, for a second look."""
        typed = Path(self.pipeline_edit.text().strip())
        try:
            self.choice().spec()
            resolved = resolve_source(typed)
        except SegScopeError as exc:
            self.status_label.setText(str(exc))
            return False
        if resolved.path is None:
            self.status_label.setText(f"{typed} has no model card: make one with File > Build model card…")
            return False
        self.pipeline_edit.setText(str(resolved.path))
        if resolved.note:
            self.status_label.setText(resolved.note)
            return False
        return True

    def accept(self) -> None:
        """Close only on fields the CLI would take; else say why in the dialog."""
        if self.settled():
            super().accept()

    def _browse_pipeline(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Pipeline or model card", self.pipeline_edit.text(), SOURCE_FILTER)
        if path:
            self.pipeline_edit.setText(path)

    def _browse_key(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "SSH private key", str(Path.home() / ".ssh"))
        if path:
            self.key_edit.setText(path)

    def test_connection(self) -> None:
        if self._probe is not None:
            return
        if self.kind() == "remote" and not self.host_edit.text().strip():
            self.status_label.setText("Host: enter the Ascend host's name or address")
            return
        if not self.settled():
            return
        self.test_button.setEnabled(False)
        self.status_label.setText("Connecting…")
        choice = self.choice()
        self._probe = self.jobs.submit(None, partial(probe, lambda: open_backend(choice.spec())), self._on_probe_done)

    def _on_probe_done(self, answer: tuple[Capabilities | None, Exception | None]) -> None:
        capabilities, error = answer
        self._probe = None
        self.test_button.setEnabled(True)
        if capabilities is not None:
            self.status_label.setText(f"OK: {capabilities.name} on {capabilities.device}")
            return
        assert error is not None  # (`probe` answers one or the other)
        fingerprint = unknown_host_fingerprint(error)
        if fingerprint and confirm_host_key(self, getattr(error, "host", "") or self.host_edit.text().strip(),
                                            fingerprint):
            self._accepted_fingerprint = fingerprint
            self.test_connection()
            return
        self.status_label.setText(describe_error(error)[0])

    def done(self, result: int) -> None:
        """Closing waits for a test still connecting (its backend is closed on its worker); its answer is
        no longer shown."""
        if self._probe is not None:
            self._probe.wait()
            self._probe.cancel()
            self._probe = None
        super().done(result)
