"""The viewer's backend choice as one Qt-free value (`BackendChoice`): the Backend dialog's fields, kept as a
profile between sessions and opened as the CLI's `BackendSpec` (`spec`). Its fields are checked by the spec's
own rule (`local_where`, the registry's kinds): a saved value the spec would refuse falls back to its default."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from .backend_spec import BackendSpec, RemoteHost, SshLogin, local_where
from .backends.registry import BACKENDS, CHOSEN_KINDS
from .errors import SegScopeError
from .stream.pipeline import DEFAULT_PIPELINE

#: The local backends of the registry the viewer offers, then a remote host over SSH.
KINDS = (*CHOSEN_KINDS, "remote")


@dataclass(frozen=True)
class BackendChoice:
    """What the Backend dialog picked (kept as a profile); `spec()` is what opens (off the GUI thread: a remote
    connect takes time)."""

    kind: str = "embedded"
    pipeline: Path = DEFAULT_PIPELINE
    host: str = ""
    port: int = 22
    user: str = ""
    key_file: str = ""
    sdk_path: str = ""
    #: "SHA256:..." of a host key the user accepted in the confirmation dialog (trusted once, then recorded).
    accepted_fingerprint: str = ""
    password: str = field(default="", repr=False)  # memory only: never in a profile
    #: Local kinds only: one stream per device id ("0,1", as `--devices`), or the images as tasks on a Dask
    #: cluster ("tcp://HOST:PORT" or "ssh://HOST,...", as `--cluster`); empty: one stream here.
    devices: str = ""
    cluster: str = ""

    @property
    def target(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user + '@' if self.user else ''}{host}:{self.port}"

    @property
    def set_env(self) -> str | None:
        """The SDK's environment script on the host: the SDK path's set_env.sh, or the .sh file given."""
        if not self.sdk_path:
            return None
        return self.sdk_path if self.sdk_path.endswith(".sh") else f"{self.sdk_path.rstrip('/')}/set_env.sh"

    def spec(self) -> BackendSpec:
        """What to open; the CLI's one-line error (its rule, `local_where`) for devices or cluster fields it would
        refuse, naming the fields."""
        accepted = self.accepted_fingerprint or False
        if self.kind == "remote":  # the worker opens "auto" on the host (MindX when it imports)
            login = SshLogin(accepted, set_env=self.set_env, password=self.password or None,
                             key_filename=Path(self.key_file).expanduser() if self.key_file else None)
            return BackendSpec("auto", self.pipeline, RemoteHost(self.target, login))
        where = local_where(self.devices or None, self.cluster or None, SshLogin(accepted), ("Devices", "Cluster"))
        sdk_home = Path(self.sdk_path).expanduser() if self.sdk_path else None  # where an SDK kind looks
        return BackendSpec(self.kind, self.pipeline, where, sdk_home=sdk_home)

    def describe(self) -> str:
        if self.kind == "remote":
            return f"remote {self.target}"
        if self.cluster:
            return f"{self.kind} on the cluster {self.cluster}"
        api = BACKENDS[self.kind].api  # an Ascend API runs on the Ascend host this is
        text = f"{api or self.kind} ({'this host' if api else 'this machine'})"
        return f"{text}, devices {self.devices}" if self.devices else text

    def as_profile(self) -> dict[str, str]:
        return {"kind": self.kind, "pipeline": str(self.pipeline), "host": self.host, "port": str(self.port),
                "user": self.user, "key_file": self.key_file, "sdk_path": self.sdk_path, "devices": self.devices,
                "cluster": self.cluster}

    @classmethod
    def from_profile(cls, profile: dict[str, str]) -> BackendChoice:
        """The saved choice; a value that is not one the dialog could have saved (a hand-edited or old settings
        file) falls back to its default: devices and cluster by the rule `spec` opens them by."""
        default = cls()
        kind = profile.get("kind", default.kind)
        pipeline = Path(profile["pipeline"]) if profile.get("pipeline") else default.pipeline
        port = profile.get("port", "")
        devices = profile.get("devices", "") if default.takes(devices=profile.get("devices", "")) else default.devices
        cluster = profile.get("cluster", "") if default.takes(cluster=profile.get("cluster", "")) else default.cluster
        return cls(kind if kind in KINDS else default.kind, pipeline if pipeline.is_file() else default.pipeline,
                   profile.get("host", ""), int(port) if _is_port(port) else default.port, profile.get("user", ""),
                   profile.get("key_file", ""), profile.get("sdk_path", ""), devices=devices,
                   cluster=default.cluster if devices else cluster)  # both: the devices (one of them is wrong)

    def takes(self, devices: str = "", cluster: str = "") -> bool:
        """Whether this choice with these devices and cluster fields makes a spec (`spec`'s rule; nothing is
        opened)."""
        try:
            replace(self, devices=devices, cluster=cluster).spec()
        except SegScopeError:
            return False
        return True


def _is_port(text: str) -> bool:
    """A TCP port in ASCII digits ("²" is a digit to `str.isdigit`, not to `int`)."""
    return text.isascii() and text.isdigit() and 0 < int(text) < 65536
