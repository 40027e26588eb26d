"""The viewer's backend choice (`core.backend_choice.BackendChoice`) without Qt: the specs it opens are the
CLI's, and a saved profile's fields are checked by the rule those specs are made by."""

from __future__ import annotations

from segscope.core.backend_choice import BackendChoice
from segscope.core.backend_spec import BackendSpec, Cluster, Devices, RemoteHost, SshLogin, spec_from_args
from segscope.core.cli import build_parser
from segscope.core.stream.pipeline import DEFAULT_PIPELINE


def test_a_remote_profile_brings_probabilities_back_exactly_like_the_cli():
    spec = BackendChoice("remote", DEFAULT_PIPELINE, "10.0.0.5", 2222, "hw", sdk_path="/sdk").spec()
    host = RemoteHost("hw@10.0.0.5:2222", SshLogin(set_env="/sdk/set_env.sh"))
    assert spec == BackendSpec("auto", DEFAULT_PIPELINE, host) and host.probabilities == "float32"
    assert spec == spec_from_args(build_parser().parse_args(
        ["eval", "--dataset", "d", "--remote", "hw@10.0.0.5:2222", "--set-env", "/sdk/set_env.sh"]))


def test_local_choices_make_the_specs_the_cli_makes(tmp_path):
    assert BackendChoice("mindx", DEFAULT_PIPELINE, devices="0,1", sdk_path=str(tmp_path)).spec() == \
        BackendSpec("mindx", DEFAULT_PIPELINE, Devices((0, 1)), sdk_home=tmp_path)
    assert BackendChoice(cluster="ssh://a,b", accepted_fingerprint="SHA256:x").spec() == \
        BackendSpec("embedded", DEFAULT_PIPELINE, Cluster("ssh://a,b", SshLogin("SHA256:x")))
    assert BackendChoice().spec() == BackendSpec("embedded", DEFAULT_PIPELINE)


def test_a_saved_profile_keeps_what_the_spec_takes_and_drops_what_it_refuses():
    good = {"kind": "embedded", "pipeline": str(DEFAULT_PIPELINE), "devices": "0,1"}
    assert BackendChoice.from_profile(good).spec() == BackendSpec("embedded", DEFAULT_PIPELINE, Devices((0, 1)))
    # "0,0" lists a device twice and "h:1" is no scheduler address: each would refuse to open, so each is dropped
    assert BackendChoice.from_profile({**good, "devices": "0,0"}).devices == ""
    assert BackendChoice.from_profile({"cluster": "h:1"}).cluster == ""
    assert BackendChoice.from_profile({"cluster": "tcp://h:8786"}).spec().where == Cluster("tcp://h:8786")
