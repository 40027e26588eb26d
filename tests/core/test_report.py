"""`segscope report`: one self-contained HTML page whose numbers follow `eval --json` (aggregates, counts, n/a and
inf), with bootstrap intervals checked against SciPy, definitions, provenance without local paths, the worst images'
errors drawn, a table of the worst images sorted by its own script (every image in the CSV beside the page, as eval
exports it), rendered by a real headless Chromium where Debian's package is installed (skipped otherwise)."""

from __future__ import annotations

import base64
import csv
import hashlib
import html
import json
import re
import shutil
import subprocess

import cv2
import numpy as np
import pytest
from scipy import stats

from helpers import run_cli

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def dataset(small_dataset, write_png):
    """The small dataset (64x48 images, the model's input 960: image != model input; 3 without a mask), one truth a
    saved correction, plus two light images the model finds nothing in: e with an empty truth (every foreground
    metric n/a) and m whose truth has a defect (HD95 inf, a miss)."""
    mask = cv2.imread(str(small_dataset / "10" / "mask.png"), cv2.IMREAD_GRAYSCALE)
    write_png(small_dataset / "10" / "mask_corrected.png", mask)
    light = np.full((48, 64, 3), 215, np.uint8)
    for name in ("e", "m"):
        write_png(small_dataset / name / "image.png", light)
    write_png(small_dataset / "e" / "mask.png", np.zeros((48, 64), np.uint8))
    missed = np.zeros((48, 64), np.uint8)
    missed[10:20, 30:42] = 255
    write_png(small_dataset / "m" / "mask.png", missed)
    return small_dataset


def _text(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def _section(page: str, title: str) -> str:
    """The text of the page's section headed `title` (up to the next heading)."""
    return _text(page.split(f"<h2>{title}")[1].split("<h2>")[0])


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


def test_report_is_self_contained_and_its_summary_follows_eval(report):
    page, document = report
    assert page.startswith("<!DOCTYPE html>")
    [script] = re.findall(r"<script>(.*?)</script>", page, re.S)  # the one script, allowed by its hash alone
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{digest}'" in page
    sources = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    for source in sources:
        png = base64.b64decode(source.split(",", 1)[1])
        assert cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR) is not None
    summary = _section(page, "Run summary")
    aggregates = document["summary"]["aggregates"]
    rows = [r for r in document["images"] if "foreground_dice" in r]
    for key, title in (("foreground_dice", "Dice (foreground)"), ("hd95", "HD95 (px)"), ("cldice", "clDice"),
                       ("brier", "Brier score (per image)")):  # the images' mean, named apart from the pooled
        found = aggregates[key]
        values = [r[key] for r in rows if isinstance(r[key], float)]  # finite: not null (n/a), not "inf"
        interval = stats.bootstrap((np.array(values),), np.mean, n_resamples=9999, method="percentile", **{
            "rng" if "rng" in stats.bootstrap.__code__.co_varnames else "random_state": np.random.default_rng(0)
        }).confidence_interval
        digits = 2 if key == "hd95" else 4
        expected = (rf"{re.escape(title)} {found['mean']:.{digits}f} \[{interval.low:.{digits}f}, "
                    rf"{interval.high:.{digits}f}\] {found['median']:.{digits}f} {found['finite']} {found['na']} "
                    rf"{found['infinite']}")
        assert re.search(expected, summary), (expected, summary)
    # e: no foreground anywhere (n/a); m: a truth-only defect (HD95 inf, worst case its ROI's diagonal 80)
    assert (aggregates["foreground_dice"]["na"], aggregates["hd95"]["infinite"]) == (1, 1)
    assert re.search(rf"HD95 \(px\) .* {aggregates['hd95']['worst_case']['mean']:.2f} / ", summary)
    # The images' mean ECE (foreground) and the pooled one are named apart (two numbers, two names)
    assert "ECE (foreground) (per image)" in summary and "ECE (pooled), foreground (truth or prediction)" in page
    assert "not the mean of the images' values" in page
    assert re.search(r"prediction and truth: <span class=\"key\" style=\"background: rgb\(\d+, \d+, \d+\)\"></span>\w",
                     page)  # the classes' colours, named
    assert aggregates["hd95"]["worst_case"]["mean"] > aggregates["hd95"]["mean"]


def test_report_defines_every_metric_and_names_no_local_path(report, dataset, tmp_path):
    page, document = report
    definitions = _section(page, "Definitions")
    for title, unit, reference in (("HD95 (px)", "px", "Nikolov et al. 2021"), ("clDice", "ratio", "Shit et al. 2021"),
                                   ("ECE (foreground)", "ratio", "Guo et al. 2017"),
                                   ("False alarms", "defects", "SegScope's definition")):
        assert re.search(rf"\b{re.escape(title)} {unit} .*?{re.escape(reference)}", definitions), title
    assert "bilinear" in definitions  # how the calibration resampled the truth
    assert str(tmp_path) not in page and str(dataset) not in page  # provenance, lists and warnings: names only
    provenance = _section(page, "Provenance")
    assert " dataset dataset " in provenance and "unet_simple_opencv.pipeline" in provenance
    assert "--truth auto: truth: 1 of 6 images scored against their saved correction" in provenance


def test_report_counts_are_integers_and_absent_classes_n_a(report):
    page, document = report
    defects = document["summary"]["defects"]
    assert re.search(rf"tp {defects['tp']} fp {defects['fp']} fn {defects['fn']} merged {defects['merged']} split "
                     rf"{defects['split']} f1 {defects['f1']:.4f}", _section(page, "Defects"))
    per_class = _section(page, "Per class")
    dice_1 = document["summary"]["aggregates"]["dice_1"]
    assert dice_1["na"] == 1 and f"{dice_1['mean']:.4f} (1 n/a)" in per_class  # image e: n/a, never 1.0
    table = page.split("<h2>Every image with a mask")[1]
    for row in (r for r in document["images"] if "foreground_dice" in r):
        assert f'data-v="{row["defect_tp"]}">{row["defect_tp"]}</td>' in table  # "2", never "2.0"
    assert "_class_0" not in page and "2.0</td>" not in table


def test_the_worst_images_show_their_misses(report):
    page, document = report
    worst = page.split("<h2>Worst 2 images")[1].split("<h2>")[0]
    assert worst.count("<figcaption>errors</figcaption>") == 2 and worst.count("<figcaption>truth</figcaption>") == 2
    assert re.search(r"1\.\s*<b>m</b>", worst)  # the missed defect: Dice 0, the worst
    uri = re.search(r'alt="m errors" src="data:image/png;base64,([^"]+)"', worst).group(1)
    errors = cv2.imdecode(np.frombuffer(base64.b64decode(uri), np.uint8), cv2.IMREAD_COLOR)
    sky_blue = np.all(errors == (233, 180, 86), axis=-1)  # FN in the viewer's colour (BGR)
    ys, xs = np.nonzero(sky_blue)
    assert (ys.min(), ys.max() + 1, xs.min(), xs.max() + 1) == (10, 20, 30, 42)  # exactly the missed square


def test_per_class_table_of_a_three_class_model(tmp_path, write_png):
    """Rendered straight from evaluations of a 3-class result: one row per foreground class, named by the card;
    class 2 is in neither mask of image b: n/a there, counted, its mean over image a alone."""
    from segscope.core.dataset.dataset import Dataset
    from segscope.core.evaluate import score
    from segscope.core.metrics import catalogue
    from segscope.core.quality.scoring import QualitySummary
    from segscope.core.quality.spec import MetricSpec
    from segscope.core.report.collect import ReportData
    from segscope.core.report.html import render
    from segscope.core.result import InferenceResult
    from segscope.core.roi import Roi

    truth = np.zeros((30, 40), np.uint8)
    truth[5:15, 5:15] = 1
    truth[20:25, 10:35] = 2
    only_crack = np.where(truth == 2, 0, truth).astype(np.uint8)
    for name, mask in (("a", truth), ("b", only_crack)):
        write_png(tmp_path / "d" / name / "image.png", np.full((30, 40, 3), 128, np.uint8))
        write_png(tmp_path / "d" / name / "mask.png", mask)
    dataset = Dataset.open(tmp_path / "d")
    predicted = truth.copy()
    predicted[20:25, 10:20] = 0  # class 2 partly missed
    spec = MetricSpec.parse("hd95,defect_f1")
    with ReportData(dataset, spec, ("background", "crack", "scratch"), catalogue.lookup("foreground_dice"), 1) as data:
        for item, labels in zip(dataset.items, (predicted, only_crack)):
            result = InferenceResult(np.eye(3, dtype=np.float32)[labels], labels, Roi(0, 0, 40, 30), (40, 30))
            data.add(score(dataset, item, result, quality=spec))
        data.finish()
    summary = {**data.summary.means(), **QualitySummary(spec).summary()}
    page = render(data, summary, {"created": "now"}, {"distributions": b"png"}, "r.csv")
    per_class = _section(page, "Per class")
    # Class 2 in image a: Dice 2·15/(15 + 25) = 0.75, IoU 15/25; its 5x15 piece is IoU 15/25 >= 0.5 of the 5x25
    # truth, a TP. HD95: the truth's left side (4 edges and 2 cuts, 5.4 px of its 58.8 px contour, over 5 %) lies
    # 10 px from the prediction's left side.
    assert re.search(r"1 crack 1\.0000 1\.0000 0\.00 1\.0000 1\.0000 1\.0000 2 0 0 0 0", per_class), per_class
    assert re.search(r"2 scratch 0\.7500 \(1 n/a\) 0\.6000 \(1 n/a\) 10\.00 \(1 n/a\) 1\.0000 \(1 n/a\) 1\.0000 "
                     r"\(1 n/a\) 1\.0000 \(1 n/a\) 1 0 0 0 0", per_class), per_class
    assert "Defects found (sum)" in page and "Fragments (sum)" in page


def _csv_rows(path) -> list[dict[str, str]]:
    """A metric table's rows without the stage times (each run's own)."""
    with open(path, newline="", encoding="utf-8") as file:
        return [{k: v for k, v in row.items() if not k.startswith("time_")} for row in csv.DictReader(file)]


def test_every_image_is_in_the_csv_beside_the_page_as_eval_exports_it(report, tiny_model_project, dataset, tmp_path):
    page, document = report
    code, _ = run_cli("eval", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--metrics", "all",
                      "--export", tmp_path / "export", "--export-kinds", "mask")
    assert code == 0
    rows = _csv_rows(tmp_path / "report.csv")
    assert [r["id"] for r in rows] == [r["id"] for r in document["images"]] == ["1", "2", "3", "10", "e", "m"]
    assert rows == _csv_rows(tmp_path / "export" / "metrics.csv")  # every number as eval's
    assert "<b>report.csv</b> beside this page" in page


def test_the_page_lists_the_worst_rows_and_the_first_images_without_masks(tiny_model_project, dataset, tmp_path,
                                                                         write_png):
    write_png(dataset / "n" / "image.png", np.full((48, 64, 3), 90, np.uint8))  # a second image without a mask
    out = tmp_path / "r.html"
    code, text = run_cli("report", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--out", out,
                         "--metrics", "", "--rows", "1")
    assert code == 0 and f"every image in {tmp_path / 'r.csv'}" in text
    page = out.read_text(encoding="utf-8")
    code, eval_text = run_cli("eval", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--json")
    dice = {r["id"]: r["foreground_dice"] for r in json.loads(eval_text)["images"] if "foreground_dice" in r}
    worst = sorted((i for i in dice if dice[i] is not None), key=lambda i: dice[i])[:1]
    assert len(dice) == 5 and "<h2>The 1 worst of the 5 images with a mask by Dice (foreground)</h2>" in page
    table = page.split('<table class="sortable">')[1].split("</table>")[0]
    assert re.findall(r'<tr><td data-v="([^"]+)">', table) == worst  # worst first
    assert "The other 4 (and the images without a mask) are in <b>r.csv</b>" in page
    missing = _section(page, "Images without masks")
    assert "Images without masks 3 ... and 1 more (in r.csv)." in missing  # the first one listed, then a count
    assert len(_csv_rows(tmp_path / "r.csv")) == 7


def test_with_room_for_every_image_n_a_comes_last(report):
    page, document = report
    table = page.split('<table class="sortable">')[1].split("</table>")[0]
    dice = {r["id"]: r["foreground_dice"] for r in document["images"] if "foreground_dice" in r}
    ranked = sorted((i for i in dice if dice[i] is not None), key=lambda i: dice[i])
    assert re.findall(r'<tr><td data-v="([^"]+)">', table) == [*ranked, "e"]  # e: n/a, after every other
    assert "<h2>Every image with a mask (5), the worst first by Dice (foreground)</h2>" in page


def test_the_csv_beside_the_page_is_never_replaced_silently(tiny_model_project, dataset, tmp_path, capsys):
    out = tmp_path / "r.html"
    (tmp_path / "r.csv").write_text("mine")
    code, _ = run_cli("report", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--out", out)
    assert code == 2 and "r.csv: already exists" in capsys.readouterr().err
    assert (tmp_path / "r.csv").read_text() == "mine" and not out.exists()
    code, _ = run_cli("report", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--out",
                      tmp_path / "r.csv")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "name the page .html" in err
    code, _ = run_cli("report", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--out", out,
                      "--metrics", "", "--overwrite")
    assert code == 0 and (tmp_path / "r.csv").read_text().startswith("id,image,roi,")


def test_a_folder_where_the_page_or_its_csv_goes_is_refused_before_the_run(tiny_model_project, dataset, tmp_path,
                                                                            capsys):
    page, table = tmp_path / "p.html", tmp_path / "q.csv"
    page.mkdir()
    table.mkdir()
    code, _ = run_cli("report", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--out", page,
                      "--overwrite")
    assert code == 2
    assert capsys.readouterr().err == f"segscope: error: --out {page}: is a folder; give the path of a file to write\n"
    code, _ = run_cli("report", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--out",
                      tmp_path / "q.html", "--overwrite")
    assert code == 2
    assert capsys.readouterr().err == (f"segscope: error: --out {tmp_path / 'q.html'}: the CSV of every image goes to "
                                       f"{table}, which is a folder; move it or name the page otherwise\n")
    assert list(page.iterdir()) == [] and list(table.iterdir()) == [] and not (tmp_path / "q.html").exists()


def test_the_line_saying_what_was_written_counts_in_words(tiny_model_project, small_dataset, tmp_path):
    """It said "1 images, 1 with masks"."""
    one = tmp_path / "one"
    shutil.copytree(small_dataset / "10", one / "10")
    out = tmp_path / "r.html"
    code, text = run_cli("report", "--dataset", one, "--pipeline", tiny_model_project.pipeline, "--out", out,
                         "--metrics", "")
    assert code == 0 and f"wrote {out} (" in text and "MB): 1 image (1 with a mask), the 1 worst by " in text


def test_report_help_is_honest_and_paths_come_back_when_asked(tiny_model_project, dataset, tmp_path, capsys):
    assert run_cli("report", "--help")[0] == 0
    helped = re.sub(r"\s+", " ", capsys.readouterr().out)
    assert "Default: all (every one above)" in helped and "--absolute-paths" in helped
    out = tmp_path / "abs.html"
    code, _ = run_cli("report", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--out", out,
                      "--metrics", "hd95", "--absolute-paths", "--worst", "0")
    assert code == 0 and str(dataset.resolve()) in out.read_text(encoding="utf-8")


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


def _chromium(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-extensions", *arguments], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium_with_no_missing_resource(report, tmp_path):
    page, document = report
    # The probe is one more script: the copy's policy lets inline scripts run, and still loads nothing else.
    probed = page.replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';")
    probed = probed.replace("</body>", PROBE + "</body>")
    copy = tmp_path / "probed.html"
    copy.write_text(probed, encoding="utf-8")
    dom = _chromium(f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
                    copy.as_uri()).stdout
    found = re.search(r"<title>PROBE(.*?)</title>", dom, re.S)
    assert found, dom[:500]
    probe = json.loads(html.unescape(found.group(1)))
    assert probe["widths"] and all(width > 0 for width in probe["widths"])  # every image decoded
    assert probe["fetched"] == [] and probe["refused"] == []
    # The report itself, its policy untouched: its own script sorts the table (here by the address) ...
    report_file = tmp_path / "report.html"
    dom = _chromium(f"--user-data-dir={tmp_path / 'p3'}", "--virtual-time-budget=3000", "--dump-dom",
                    report_file.as_uri() + "#sort=foreground_dice-desc").stdout
    table = dom.split('class="sortable"')[1]
    assert 'aria-sort="descending"' in table
    shown = re.findall(r'<tr><td data-v="([^"]+)">', table)
    dice = {r["id"]: r["foreground_dice"] for r in document["images"] if "foreground_dice" in r}
    ranked = sorted((i for i in dice if dice[i] is not None), key=lambda i: -dice[i])
    assert shown == [*ranked, *(i for i in dice if dice[i] is None)]  # n/a last
    # ... and draws.
    screenshot = tmp_path / "report.png"
    _chromium(f"--user-data-dir={tmp_path / 'p2'}", "--window-size=1280,2000", f"--screenshot={screenshot}",
              report_file.as_uri())
    shot = cv2.imread(str(screenshot))
    assert shot is not None and shot.std() > 10


def test_thumbnails_keep_what_covers_most_and_errors_are_by_class():
    """Hand-made 360 x 360 maps (thumbnails 180 x 180: one thumbnail pixel per 2 x 2 block)."""
    from segscope.core.metrics.review import FN, FP, TP
    from segscope.core.palette import class_color
    from segscope.core.report.collect import class_errors, error_thumbnail, label_thumbnail

    codes = np.zeros((360, 360), np.uint8)
    codes[0:2, 0:2] = TP
    codes[0, 0] = FN  # a block three quarters found, one pixel missed: found (misses no longer drawn over it)
    codes[10, 10] = FN  # a lone missed pixel on background: kept, one thumbnail pixel
    codes[20:22, 20:22] = [[FP, FP], [FN, 0]]  # two false alarm pixels, one miss: the false alarm
    thumbnail = error_thumbnail(codes)
    assert thumbnail.shape == (180, 180)
    assert (thumbnail[0, 0], thumbnail[5, 5], thumbnail[10, 10], thumbnail[1, 1]) == (TP, FN, FP, 0)
    assert np.count_nonzero(thumbnail) == 3
    truth = np.zeros((4, 6), np.uint8)
    truth[1:3, 1:4] = 1
    swapped = np.where(truth == 1, 2, 0).astype(np.uint8)  # every defect predicted as the other class
    errors = class_errors(swapped, truth)
    assert (errors[truth == 1] == FN).all() and (errors[truth == 0] == 0).all()  # no TP: a swap is no success
    right = class_errors(truth, truth)
    assert (right[truth == 1] == TP).all()
    spill = truth.copy()
    spill[0, 0] = 2
    assert class_errors(spill, truth)[0, 0] == FP
    labels = np.zeros((360, 360), np.uint8)
    labels[0:2, 0:2] = [[1, 1], [1, 2]]  # class 1 covers most: class 1's colour, not the later class's
    drawn = label_thumbnail(labels, 3)
    assert tuple(drawn[0, 0]) == class_color(1)[::-1] and tuple(drawn[0, 1]) != class_color(2)[::-1]
