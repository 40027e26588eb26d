"""`segscope report`: one self-contained HTML page whose numbers and worst images follow `eval --json`,
rendered by a real headless Chromium where Debian's package is installed (skipped otherwise)."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import subprocess

import cv2
import numpy as np
import pytest

from helpers import run_cli

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")




@pytest.fixture
def dataset(small_dataset, write_png):
    """The small dataset, one image's truth a saved correction (said in a note) and one without a mask."""
    mask = cv2.imread(str(small_dataset / "10" / "mask.png"), cv2.IMREAD_GRAYSCALE)
    write_png(small_dataset / "10" / "mask_corrected.png", mask)
    return small_dataset


@pytest.fixture
def report(tiny_model_project, dataset, tmp_path):
    """The report of the dataset (the worst 2 by foreground Dice) and `eval --json`'s document of it."""
    out = tmp_path / "report.html"
    code, text = run_cli("report", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--out", out,
                         "--worst", "2")
    assert code == 0 and f"wrote {out}" in text
    code, text = run_cli("eval", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--metrics", "all",
                         "--json")
    assert code == 0
    return out.read_text(encoding="utf-8"), json.loads(text)


def test_report_is_self_contained_and_follows_eval(report):
    page, document = report
    assert page.startswith("<!DOCTYPE html>")
    assert "default-src 'none'; img-src data:" in page  # the browser may load nothing from anywhere
    sources = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    for source in sources:
        png = base64.b64decode(source.split(",", 1)[1])
        assert cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR) is not None
    assert "<script" not in page
    rows = [r for r in document["images"] if "hd95" in r]
    worst = sorted(rows, key=lambda r: (r["foreground_dice"], [r["id"] for r in rows].index(r["id"])))[:2]
    text = html.unescape(re.sub(r"<[^>]+>", " ", page))
    section = text.split("Worst 2 images by Dice (lowest first)")[1].split("Per class")[0]
    assert re.findall(r"(\d+)\.\s+(\S+)\s+ROI", section) == [("1", worst[0]["id"]), ("2", worst[1]["id"])]
    for row in worst:  # each worst image's numbers as eval computed them, and its four panels
        block = section.split(f" {row['id']} ")[1]
        assert f"Dice: {row['foreground_dice']:.4f}" in block
        assert f"NSD@2: {row['nsd']:.4f}" in block
    assert page.count('<figcaption>truth</figcaption>') == 2 and page.count("<figcaption>image</figcaption>") == 2
    defects = document["summary"]["defects"]
    assert re.search(rf"tp\s+{defects['tp']}\s+fp\s+{defects['fp']}\s+fn\s+{defects['fn']}\s+f1\s+"
                     rf"{defects['f1']:.4f}", text.split("Defects")[-1])
    table = text.split("Every image with a mask")[1]
    for row in rows:  # every image's line: its id, ROI, Dice and ECE as eval computed them
        assert re.search(rf"\b{row['id']}\s+{row['roi']}\s+{row['soft_dice']:.4f}\s+{row['foreground_dice']:.4f}"
                         rf".*?{row['ece']:.4f}", table, re.S)
    no_mask = text.split("Images without masks")[-1]
    assert re.search(r"\b3\b", no_mask.split("Warnings")[0])


def test_bad_report_options_are_one_line(tiny_model_project, dataset, tmp_path, capsys):
    common = ["report", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--out", tmp_path / "r.html"]
    code, _ = run_cli(*common, "--metrics", "cldice", "--rank", "hd95")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--rank hd95" in err and "--metrics" in err, err
    code, _ = run_cli(*common, "--worst", "500")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--worst" in err and "0 to 100" in err
    assert not (tmp_path / "r.html").exists()


def test_an_existing_report_is_kept_without_overwrite(tiny_model_project, dataset, tmp_path, capsys):
    out = tmp_path / "r.html"
    out.write_text("mine")
    code, _ = run_cli("report", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--out", out)
    assert code == 2 and "already exists" in capsys.readouterr().err and out.read_text() == "mine"


def test_without_matplotlib_the_report_says_what_to_install(tiny_model_project, dataset, tmp_path, capsys,
                                                            monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    code, _ = run_cli("report", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline,
                      "--out", tmp_path / "r.html")
    assert code == 2 and 'pip install "segscope[report]"' in capsys.readouterr().err


#: Appended to a copy of the report: once loaded, list each image's decoded width and every resource the page
#: fetched or was refused, into the title `--dump-dom` prints.
PROBE = """<script>
const refused = [];
document.addEventListener("securitypolicyviolation", e => refused.push(e.blockedURI));
window.addEventListener("load", () => {
  document.title = "PROBE" + JSON.stringify({widths: [...document.images].map(i => i.complete ? i.naturalWidth : -1),
    fetched: performance.getEntriesByType("resource").map(r => r.name), refused});
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium_with_no_missing_resource(report, tmp_path):
    page, _ = report
    # The probe is the only script: the copy's policy also lets inline scripts run, and still loads nothing else.
    probed = page.replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';")
    probed = probed.replace("</body>", PROBE + "</body>")
    copy = tmp_path / "probed.html"
    copy.write_text(probed, encoding="utf-8")
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
               f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom", copy.as_uri()]
    dom = subprocess.run(command, capture_output=True, text=True, timeout=120).stdout
    found = re.search(r"<title>PROBE(.*?)</title>", dom, re.S)
    assert found, dom[:500]
    probe = json.loads(html.unescape(found.group(1)))
    assert probe["widths"] and all(width > 0 for width in probe["widths"])  # every image decoded
    assert probe["fetched"] == [] and probe["refused"] == []
    screenshot = tmp_path / "report.png"  # the report itself, its policy untouched
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'p2'}",
                    "--window-size=1280,2000", f"--screenshot={screenshot}", (tmp_path / "report.html").as_uri()],
                   capture_output=True, timeout=120, check=True)
    shot = cv2.imread(str(screenshot))
    assert shot is not None and shot.std() > 10  # something was drawn, not a blank page


def test_per_class_table_of_a_three_class_model(tmp_path, write_png):
    """Rendered straight from evaluations of a 3-class result: one row per foreground class, named by the card,
    with the mean per-class Dice and the per-class QA values."""
    from segscope.core.dataset.dataset import Dataset
    from segscope.core.evaluate import score
    from segscope.core.metrics import catalogue
    from segscope.core.quality.spec import MetricSpec
    from segscope.core.report.collect import ReportData
    from segscope.core.report.html import render
    from segscope.core.result import InferenceResult
    from segscope.core.roi import Roi

    truth = np.zeros((30, 40), np.uint8)
    truth[5:15, 5:15] = 1
    truth[20:25, 10:35] = 2
    write_png(tmp_path / "d" / "a" / "image.png", np.full((30, 40, 3), 128, np.uint8))
    write_png(tmp_path / "d" / "a" / "mask.png", truth)
    dataset = Dataset.open(tmp_path / "d")
    predicted = truth.copy()
    predicted[20:25, 10:20] = 0  # class 2 partly missed
    probabilities = np.eye(3, dtype=np.float32)[predicted]
    result = InferenceResult(probabilities, predicted, Roi(0, 0, 40, 30), (40, 30))
    spec = MetricSpec.parse("hd95,defect_f1")
    evaluation = score(dataset, dataset.items[0], result, quality=spec)
    with ReportData(dataset, spec, ("background", "crack", "scratch"), catalogue.lookup("foreground_dice"), 1) as data:
        data.add(evaluation)
        data.finish()
    page = render(data, {}, {"created": "now"}, {"distributions": b"png"})
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))
    per_class = text.split("Per class")[1].split("Defects")[0]
    # Class 2: Dice 2·15/(15 + 25) = 0.75, IoU 15/25; its 5x15 piece is IoU 15/25 >= 0.5 of the 5x25 truth, a TP.
    # HD95: the truth's left side (4 edges and 2 cuts, 5.4 px of its 58.8 px contour, over 5 %) lies 10 px from
    # the prediction's left side.
    assert re.search(r"1 crack 1\.0000 1\.0000 0\.00 1\.0000 1\.0000 1\.0000 1 0 0", per_class), per_class
    assert re.search(r"2 scratch 0\.7500 0\.6000 10\.00 1\.0000 1\.0000 1\.0000 1 0 0", per_class), per_class
