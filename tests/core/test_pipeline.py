"""Loading and validating MindX `.pipeline` files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.errors import SegScopeError
from segscope.core.stream.emulation import NotEmulated, plan_stream
from segscope.core.stream.loader import load_pipeline
from segscope.core.stream.pipeline import DEFAULT_PIPELINE, PipelineError

# The original project's pipeline, verbatim from its description (its modelPath folder was "model/").
ORIGINAL = json.loads("""
{"unet_mindspore":{"stream_config":{"deviceId":"0"},
 "appsrc0":{"props":{"blocksize":"4096000"},"factory":"appsrc","next":"mxpi_imagedecoder0"},
 "mxpi_imagedecoder0":{"props":{"cvProcessor":"opencv","outputDataFormat":"BGR"},"factory":"mxpi_imagedecoder","next":"mxpi_imagecrop0"},
 "mxpi_imagecrop0":{"props":{"cvProcessor":"opencv","dataSource":"ExternalObjects"},"factory":"mxpi_imagecrop","next":"mxpi_imageresize0"},
 "mxpi_imageresize0":{"props":{"handleMethod":"opencv","resizeType":"Resizer_Stretch","resizeHeight":"960","resizeWidth":"960"},"factory":"mxpi_imageresize","next":"mxpi_tensorinfer0"},
 "mxpi_tensorinfer0":{"props":{"dataSource":"mxpi_imageresize0","modelPath":"model/unet_hw960_bs1.om"},"factory":"mxpi_tensorinfer","next":"mxpi_dumpdata0"},
 "mxpi_dumpdata0":{"props":{"requiredMetaDataKeys":"mxpi_tensorinfer0"},"factory":"mxpi_dumpdata","next":"appsink0"},
 "appsink0":{"props":{"blocksize":"4096000"},"factory":"appsink"}}}
""")

SHIPPED_ORDER = ("appsrc0", "mxpi_imagedecoder0", "mxpi_imagecrop0", "mxpi_imageresize0", "mxpi_tensorinfer0",
                 "mxpi_dumpdata0", "appsink0")


def write(tmp_path: Path, streams: object, name: str = "p.pipeline") -> Path:
    folder = tmp_path / "pipelines"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(streams if isinstance(streams, str) else json.dumps(streams), encoding="utf-8")
    return path


def chain(*elements: tuple[str, str], props: dict[str, dict] | None = None) -> dict:
    """A stream {"s": ...} of (name, factory) elements linked in order."""
    props = props or {}
    stream: dict = {}
    for i, (name, factory) in enumerate(elements):
        stream[name] = {"factory": factory, "props": props.get(name, {})}
        if i + 1 < len(elements):
            stream[name]["next"] = elements[i + 1][0]
    return {"s": stream}


INFER = ("infer", "mxpi_tensorinfer")
INFER_PROPS = {"infer": {"modelPath": "models/m.om"}}


def test_shipped_pipeline_is_the_original_stream(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # modelPath must not depend on the current directory
    pipeline = load_pipeline(DEFAULT_PIPELINE)
    stream = pipeline.stream
    assert stream.name == "unet_mindspore"
    assert stream.config == {"deviceId": "0"}
    assert stream.order == SHIPPED_ORDER
    assert stream.input_element.name == "appsrc0" and stream.output_element.name == "appsink0"
    original = ORIGINAL["unet_mindspore"]
    for name in SHIPPED_ORDER:
        element = stream.elements[name]
        expected_props = dict(original[name]["props"])
        if name == "mxpi_tensorinfer0":
            expected_props["modelPath"] = "models/unet_hw960_bs1.om"
        assert element.factory == original[name]["factory"]
        assert element.props == expected_props
        assert element.next == ((original[name]["next"],) if "next" in original[name] else ())
    assert plan_stream(pipeline).model.name == "mxpi_tensorinfer0"  # every element is emulated
    root = Path(DEFAULT_PIPELINE).resolve().parent.parent
    assert pipeline.project_root == root
    assert pipeline.model_path() == root / "models" / "unet_hw960_bs1.om"


def test_model_path_resolves_against_the_project_root_from_any_cwd(monkeypatch, tmp_path):
    path = write(tmp_path, chain(("src", "appsrc"), INFER, props=INFER_PROPS))
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    for cwd in (tmp_path, elsewhere, path.parent):
        monkeypatch.chdir(cwd)
        assert load_pipeline(path).model_path() == tmp_path / "models" / "m.om"
    # A relative path to the file itself works too.
    monkeypatch.chdir(tmp_path)
    assert load_pipeline(Path("pipelines/p.pipeline")).model_path() == tmp_path / "models" / "m.om"


def test_absolute_model_path_is_kept(tmp_path):
    absolute = tmp_path / "elsewhere" / "model.om"
    path = write(tmp_path, chain(("src", "appsrc"), INFER, props={"infer": {"modelPath": str(absolute)}}))
    assert load_pipeline(path).model_path() == absolute


def test_with_absolute_paths_changes_only_model_path(tmp_path):
    path = write(tmp_path, chain(("src", "appsrc"), INFER, ("sink", "appsink"),
                                 props={"src": {"blocksize": "4096000"}, "infer": {"modelPath": "models/m.om",
                                                                                  "dataSource": "src"}}))
    original = json.loads(path.read_text())
    rewritten = json.loads(load_pipeline(path).with_absolute_paths())
    assert rewritten["s"]["infer"]["props"]["modelPath"] == str(tmp_path / "models" / "m.om")
    rewritten["s"]["infer"]["props"]["modelPath"] = "models/m.om"
    assert rewritten == original


def test_with_absolute_paths_makes_post_process_files_absolute_too(tmp_path):
    path = write(tmp_path, chain(("src", "appsrc"), INFER, ("seg", "mxpi_semanticsegpostprocessor"),
                                 props={**INFER_PROPS, "seg": {"postProcessConfigPath": "models/seg.cfg",
                                                               "labelPath": "/abs/labels.names",
                                                               "postProcessLibPath": "libdeeplabv3post.so"}}))
    props = json.loads(load_pipeline(path).with_absolute_paths())["s"]["seg"]["props"]
    # The SDK resolves config and label files against its working directory; the library by its own path.
    assert props == {"postProcessConfigPath": str(tmp_path / "models" / "seg.cfg"), "labelPath": "/abs/labels.names",
                     "postProcessLibPath": "libdeeplabv3post.so"}


def test_graph_with_pad_links_in_topological_order(tmp_path):
    # src -> tee -> (a, b:1) -> join -> infer, written out of order in the file.
    streams = {"s": {
        "join": {"factory": "mxpi_synchronize", "next": "infer"},
        "infer": {"factory": "mxpi_tensorinfer", "props": {"modelPath": "m.om"}},
        "b": {"factory": "mxpi_imageresize", "next": "join:1"},
        "src": {"factory": "appsrc", "next": "tee"},
        "tee": {"factory": "tee", "next": ["a", "b"]},
        "a": {"factory": "mxpi_imagecrop", "next": "join:0"},
    }}
    stream = load_pipeline(write(tmp_path, streams)).stream
    assert stream.elements["a"].next == ("join",)
    assert stream.elements["b"].next == ("join",)
    assert stream.elements["tee"].next == ("a", "b")
    assert stream.order == ("src", "tee", "a", "b", "join", "infer")
    assert stream.input_element.name == "src" and stream.output_element.name == "infer"


def test_unknown_factories_load_but_the_embedded_backend_names_them(tmp_path):
    path = write(tmp_path, chain(("src", "appsrc"), ("dec", "mxpi_imagedecoder"), ("post", "my_plugin"), INFER,
                                 ("ser", "mxpi_dataserialize"), ("appsink0", "appsink"),
                                 props={**INFER_PROPS, "dec": {"cvProcessor": "opencv"}}))
    pipeline = load_pipeline(path)
    assert pipeline.stream.elements["post"].custom and not pipeline.stream.elements["ser"].custom
    with pytest.raises(NotEmulated) as info:
        EmbeddedBackend(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    assert info.value.reason == "post (my_plugin): a custom plugin"
    assert "still valid for MindX" in message


def test_bad_json_gives_file_line_and_column(tmp_path):
    # Line 3, column 30 is the trailing comma and 31 the '}' after it (Python 3.13 names the first, older the second):
    #   4 spaces, "a" (5-7), ':' 8, ' ' 9, '{' 10, "factory" (11-19), ':' 20, ' ' 21, "appsrc" (22-29), ',' 30
    text = '{\n  "s": {\n    "a": {"factory": "appsrc",}\n  }\n}\n'
    path = write(tmp_path, text)
    with pytest.raises(PipelineError, match="invalid JSON") as info:
        load_pipeline(path)
    assert str(info.value).startswith((f"{path}:3:30: ", f"{path}:3:31: "))


@pytest.mark.parametrize(
    ("streams", "expected"),
    [
        pytest.param({"s": {"src": {"factory": "appsrc", "next": "decoder9"},
                            **chain(INFER, props=INFER_PROPS)["s"]}},
            ["stream 's'", "element 'src'", "unknown element 'decoder9'"], id="unknown-next"),
        pytest.param({"s": {"src": {"factory": "appsrc", "next": "a"},
                            "a": {"factory": "mxpi_imagecrop", "next": "b"},
                            "b": {"factory": "mxpi_imageresize", "next": ["a:1", "infer"]},
                            **chain(INFER, props=INFER_PROPS)["s"]}},
                     ["stream 's'", "cycle", "'a'", "'b'"], id="cycle"),
        pytest.param({"s": {"a": {"factory": "appsrc", "next": "infer"},
                            "infer": {"factory": "mxpi_tensorinfer", "props": {"modelPath": "m.om"},
                                      "next": "a"}}},
                     ["stream 's'", "no input element", "cycle"], id="cycle-without-input"),
        pytest.param({"s": {"src": {"props": {}, "next": "infer"}, **chain(INFER, props=INFER_PROPS)["s"]}},
                     ["stream 's'", "element 'src'", "missing 'factory'"], id="missing-factory"),
        pytest.param(chain(("src", "appsrc"), ("resize", "mxpi_imageresize"), INFER,
                           props={**INFER_PROPS, "resize": {"resizeHeight": "96O", "resizeWidth": "960"}}),
                     ["element 'resize'", "resizeHeight", "'96O'"], id="non-numeric-resize"),
        pytest.param(chain(("src", "appsrc"), ("resize", "mxpi_imageresize"), INFER,
                           props={**INFER_PROPS, "resize": {"resizeHeight": "960", "resizeWidth": "-5"}}),
                     ["element 'resize'", "resizeWidth", "'-5'"], id="negative-resize"),
        pytest.param(chain(("src", "appsrc"), INFER, props={"infer": {"dataSource": "src"}}),
                     ["element 'infer'", "modelPath"], id="missing-modelPath"),
        pytest.param({"s": {"src": {"factory": "appsrc", "next": 3}, **chain(INFER, props=INFER_PROPS)["s"]}},
                     ["element 'src'", "'next'"], id="next-not-a-name"),
        pytest.param({"s": {"stream_config": {"deviceId": "0"}}}, ["stream 's'", "no elements"],
                     id="empty-stream"),
        pytest.param([], ["expected a JSON object of streams", "got an array"], id="not-an-object"),
        pytest.param("3", ["expected a JSON object of streams", "got a number"], id="a-number"),
        pytest.param({}, ["expected a JSON object of streams", "got an empty object"], id="empty-object"),
        # MindX's own refusals (VisionSDK MxsmElement.cpp / MxsmStream.cpp):
        pytest.param(chain(("src", "appsrc"), INFER, props={"src": {"blocksize": 4096000}, **INFER_PROPS}),
                     ["element 'src'", "prop 'blocksize' is 4096000", "not a string or object"], id="number-prop"),
        pytest.param(chain(("src", "appsrc"), INFER, props={"src": {"flag": True}, **INFER_PROPS}),
                     ["element 'src'", "'flag' is true", "not a string or object"], id="bool-prop"),
        pytest.param(chain(("src", "appsrc"), INFER, props={"src": {"l": ["a"]}, **INFER_PROPS}),
                     ["element 'src'", "not a string or object"], id="list-prop"),
        pytest.param({"s": {"src": {"factory": "appsrc", "next": "infer"},
                            "infer": {"factory": "mxpi_tensorinfer", "props": {"modelPath": "m.om"},
                                      "nxt": "sink"}}},
                     ["element 'infer'", "unknown key 'nxt'"], id="unknown-element-key"),
        pytest.param({"s": {"src1": {"factory": "appsrc", "next": "infer"},
                            "src2": {"factory": "appsrc", "next": "infer"},
                            **chain(INFER, props=INFER_PROPS)["s"]}},
                     ["element 'infer'", "input pads are linked as [0, 0]"], id="two-links-to-pad-0"),
        pytest.param({"s": {"src1": {"factory": "appsrc", "next": "infer:0"},
                            "src2": {"factory": "appsrc", "next": "infer:2"},
                            **chain(INFER, props=INFER_PROPS)["s"]}},
                     ["element 'infer'", "[0, 2]"], id="pad-gap"),
        pytest.param({"s": {"src": {"factory": "appsrc", "next": "infer", "nextMeta": ["ghost"]},
                            **chain(INFER, props=INFER_PROPS)["s"]}},
                     ["element 'src'", "'nextMeta' names unknown element 'ghost'"], id="unknown-nextMeta"),
        pytest.param({"s": {"src": {"factory": "appsrc", "next": "infer:x"}, **chain(INFER, props=INFER_PROPS)["s"]}},
                     ["element 'src'", "'infer:x'"], id="bad-pad"),
        pytest.param({"s": {"src": {"factory": "appsrc", "next": "appsink_out"},
                            "appsink_out": {"factory": "appsink"}}},
                     ["element 'appsink_out'", "appsink<number>"], id="appsink-name"),
        pytest.param({"s": {"stream_config": {"deviceId": 0}, **chain(INFER, props=INFER_PROPS)["s"]}},
                     ["stream 's'", "deviceId", "string of digits"], id="numeric-device-id"),
        pytest.param(chain(("src", "appsrc"), ("resize", "mxpi_imageresize"), INFER,
                           props={**INFER_PROPS, "resize": {"paddingHeight": "16"}}),
                     ["element 'resize'", "paddingHeight", "32..8192"], id="padding-below-range"),
        pytest.param(chain(("src", "appsrc"), ("resize", "mxpi_imageresize"), INFER,
                           props={**INFER_PROPS, "resize": {"resizeType": "Resizer_Big"}}),
                     ["element 'resize'", "resizeType 'Resizer_Big' is unknown to MindX"], id="unknown-resize-type"),
        pytest.param(chain(("src", "appsrc"), ("crop", "mxpi_imagecrop"), INFER,
                           props={**INFER_PROPS, "crop": {"paddingType": "Padding_Left"}}),
                     ["element 'crop'", "paddingType 'Padding_Left' is unknown to MindX"], id="unknown-padding"),
        pytest.param(chain(("src", "appsrc"), ("resize", "mxpi_imageresize"), INFER,
                           props={**INFER_PROPS, "resize": {"minDimension": "300", "maxDimension": "200"}}),
                     ["element 'resize'", "minDimension 300 is larger than maxDimension 200"], id="min-over-max"),
        pytest.param(chain(("src", "appsrc"), ("dec", "mxpi_imagedecoder"), INFER,
                           props={**INFER_PROPS, "dec": {"cvProcessor": "cuda"}}),
                     ["element 'dec'", "'cuda' must be ascend or opencv"], id="bad-processor"),
    ],
)
def test_validation_errors_name_file_stream_and_element(tmp_path, streams, expected):
    path = write(tmp_path, streams)
    with pytest.raises(PipelineError) as info:
        load_pipeline(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    for part in expected:
        assert part in message


def test_missing_pipeline_file(tmp_path):
    with pytest.raises(PipelineError, match="pipeline file not found") as info:
        load_pipeline(tmp_path / "nope.pipeline")
    assert str(tmp_path / "nope.pipeline") in str(info.value)


def test_a_missing_model_card_is_not_called_a_pipeline_file(tmp_path):
    """The viewer opens the model its settings remember: a card moved since is said as the CLI says it."""
    with pytest.raises(PipelineError, match=r"gone\.json: not found; give a \.pipeline file, a model card") as info:
        load_pipeline(tmp_path / "gone.json")
    assert str(tmp_path / "gone.json") in str(info.value) and "pipeline file not found" not in str(info.value)


def test_missing_model_names_the_resolved_path(tmp_path):
    path = write(tmp_path, chain(("src", "appsrc"), ("dec", "mxpi_imagedecoder"), INFER, ("appsink0", "appsink"),
                                 props={"infer": {"modelPath": "models/absent.om"}, "dec": {"cvProcessor": "opencv"}}))
    with pytest.raises(SegScopeError) as info:
        EmbeddedBackend(path)
    message = str(info.value)
    assert str(tmp_path / "models" / "absent.om") in message and str(tmp_path) in message
    assert "\n" not in message


def test_stream_config_must_be_an_object(tmp_path):
    streams = {"s": {"stream_config": "deviceId 0", **chain(INFER, props=INFER_PROPS)["s"]}}
    path = write(tmp_path, streams)
    with pytest.raises(PipelineError) as info:
        load_pipeline(path)
    assert str(info.value).startswith(f"{path}: stream 's': ") and "stream_config" in str(info.value)


def test_object_props_are_kept_as_the_sdks_json_text(tmp_path):
    # nlohmann::json::dump() of an object: compact, keys sorted.
    path = write(tmp_path, chain(("src", "appsrc"), INFER,
                                 props={"src": {"cfg": {"b": 1, "a": [1, "x"]}}, **INFER_PROPS}))
    assert load_pipeline(path).stream.elements["src"].props["cfg"] == '{"a":[1,"x"],"b":1}'


def test_several_inputs_with_pads_several_sinks_and_streams(tmp_path):
    # bert-style: three appsrc into tensorinfer pads 0..2; a second, model-less stream first in the file.
    streams = {
        "side": chain(("src", "appsrc"), ("sink", "fakesink"))["s"],
        "s": {
            "appsrc2": {"factory": "appsrc", "next": "infer:2"},
            "appsrc0": {"factory": "appsrc", "next": "infer:0"},
            "appsrc1": {"factory": "appsrc", "next": "infer:1"},
            "infer": {"factory": "mxpi_tensorinfer", "props": {"modelPath": "m.om"}, "next": "tee0"},
            "tee0": {"factory": "tee", "next": ["appsink1", "appsink0"]},
            "appsink1": {"factory": "appsink"}, "appsink0": {"factory": "appsink"},
        },
    }
    pipeline = load_pipeline(write(tmp_path, streams))
    stream = pipeline.stream
    assert stream.name == "s"  # the first stream that runs a model
    assert stream.input_element.name == "appsrc0" and stream.output_element.name == "appsink0"
    assert [link.pad for link in stream.elements["appsrc1"].links] == [1]
    assert pipeline.choice() == "stream 's', input 'appsrc0', output 'appsink0'"
    assert stream.takes_tensors()


def test_a_model_less_stream_is_valid_but_has_no_model(tmp_path):
    pipeline = load_pipeline(write(tmp_path, chain(("src", "appsrc"), ("appsink0", "appsink"))))
    assert pipeline.stream.model_element is None
    with pytest.raises(PipelineError, match="runs no model"):
        pipeline.model_path()


@pytest.mark.parametrize("content", [b"\xff\xfe\x00{", "folder"], ids=["not-utf8", "a-folder"])
def test_unreadable_pipeline_files_are_one_line_errors(tmp_path, content):
    path = tmp_path / "p.pipeline"
    if content == "folder":
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(PipelineError) as info:
        load_pipeline(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)
    assert ("UTF-8" if content != "folder" else "folder") in str(info.value)


def test_the_driven_input_and_output_compare_numbers_in_names_as_numbers(tmp_path):
    streams = {"s": {
        "appsrc10": {"factory": "appsrc", "next": "infer:1"}, "appsrc2": {"factory": "appsrc", "next": "infer:0"},
        "infer": {"factory": "mxpi_tensorinfer", "props": {"modelPath": "m.om"}, "next": ["appsink10", "appsink2"]},
        "appsink10": {"factory": "appsink"}, "appsink2": {"factory": "appsink"},
    }}
    assert load_pipeline(write(tmp_path, streams)).choice() == "stream 's', input 'appsrc2', output 'appsink2'"
