"""The report as one self-contained HTML file: styles inline, every image and plot a `data:` URI, one inline script
(sorting the per-image table, allowed by its hash) and a Content-Security-Policy that lets the page load nothing from
anywhere, so it reads the same mailed or offline. Every number comes from the run's summary (the one aggregation
rule, `core.metrics.aggregate`) or from the catalogue, so the page says what `eval --json` says."""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Iterable, Mapping
from html import escape

from ..metrics import catalogue
from ..metrics.aggregate import CONFIDENCE, RESAMPLES, SEED
from ..metrics.review import ERROR_COLORS, ERROR_NAMES
from ..palette import class_color
from ..quality.options import value_text
from ..quality.spec import CALIBRATION_KEYS, COUNT_KEYS, MetricSpec
from ..review import AREA_HALF
from .collect import ReportData

PANELS = (("image", "image"), ("heatmap", "heatmap"), ("mask", "prediction"), ("truth", "truth"),
          ("errors", "errors"))
#: Sorts a `table.sortable` by the clicked column (again: the other way), n/a last either way; `#sort=<key>` or
#: `#sort=<key>-desc` in the address sorts on load.
SCRIPT = """
function sortTable(table, column, descending) {
  var rows = Array.prototype.slice.call(table.tBodies[0].rows);
  rows.sort(function (a, b) {
    var x = a.cells[column].getAttribute("data-v"), y = b.cells[column].getAttribute("data-v");
    if (x === "" || y === "") { return (x === "") - (y === ""); }
    var d = isNaN(x) || isNaN(y) ? x.localeCompare(y, undefined, {numeric: true}) : Number(x) - Number(y);
    return descending ? -d : d;
  });
  rows.forEach(function (row) { table.tBodies[0].appendChild(row); });
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, k) {
    th.setAttribute("aria-sort", k === column ? (descending ? "descending" : "ascending") : "none");
  });
}
document.querySelectorAll("table.sortable").forEach(function (table) {
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
    th.addEventListener("click", function () {
      sortTable(table, column, th.getAttribute("aria-sort") === "ascending");
    });
  });
  var wanted = /^#sort=([\\w@.]+?)(-desc)?$/.exec(location.hash);
  if (wanted) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, column) {
      if (th.getAttribute("data-key") === wanted[1]) { sortTable(table, column, !!wanted[2]); }
    });
  }
});
"""
POLICY = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-"
          + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode() + "'")
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1d2230; margin: 24px auto; max-width: 1280px; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 2px; } h2 { font-size: 17px; margin-top: 30px; border-bottom: 1px solid #ccd; }
table { border-collapse: collapse; margin: 8px 0; } td, th { padding: 3px 9px; border-bottom: 1px solid #e3e5ec; }
th { text-align: left; background: #f3f4f8; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
table.sortable th { cursor: pointer; } table.sortable th[aria-sort=ascending]::after { content: " \\25B2"; }
table.sortable th[aria-sort=descending]::after { content: " \\25BC"; }
.muted { color: #667; } .worst td { vertical-align: top; } figure { display: inline-block; margin: 0 6px 0 0; }
figcaption { font-size: 11px; color: #667; text-align: center; } img.plot { max-width: 100%; }
.key { display: inline-block; width: 10px; height: 10px; margin: 0 3px 0 8px; }
"""


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _table(header: Iterable[str] | None, rows: Iterable[Iterable[str]], numeric_from: int = 1) -> str:
    """Cells are HTML already; the header is text. Columns from `numeric_from` on align right."""
    head = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>" if header is not None else ""
    body = "".join("<tr>" + "".join(f'<td class="n">{c}</td>' if i >= numeric_from else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


def _keys(data: ReportData) -> list[str]:
    """The per-image metrics the report shows: the original and hard ones, then the chosen QA metrics."""
    return [*catalogue.BRIEF, "precision", "recall", *data.spec.keys()]


def metric_title(spec: MetricSpec, key: str, short: bool = False) -> str:
    """A metric's label in the report, or its short title for a column (NSD with its tolerance)."""
    if key == "nsd":
        return f"NSD@{spec.nsd_tolerance:g}"
    metric = catalogue.lookup(key)
    return metric.title if short else metric.label


def _aggregate(summary: Mapping[str, object], key: str) -> Mapping[str, object] | None:
    aggregates: Mapping[str, Mapping[str, object]] = summary.get("aggregates", {})  # type: ignore[assignment]
    return aggregates.get(key)


def _mean_cell(key: str, found: Mapping[str, object]) -> str:
    ci = found.get("mean_ci95")
    shown = value_text(key, found["mean"])  # type: ignore[arg-type]
    if isinstance(ci, list):
        shown += f' <span class="muted">[{value_text(key, ci[0])}, {value_text(key, ci[1])}]</span>'
    return shown


def _summary(data: ReportData, summary: Mapping[str, object]) -> str:
    """Counts, then each metric's aggregate: mean with its bootstrap interval and median over the finite values,
    how many images were n/a or infinite, and the worst-case aggregate where one is defined."""
    scored = data.summary.images
    counts = _table(None, [["images", str(data.images)], ["with masks", str(scored)],
                           ["without masks", str(data.images - scored)]])
    rows = []
    for key in (k for k in _keys(data) if k not in COUNT_KEYS):
        found = _aggregate(summary, key)
        if found is None:
            continue
        worst = found.get("worst_case")
        worst_text = (f"{value_text(key, worst['mean'])} / {value_text(key, worst['median'])}"  # type: ignore[index]
                      if isinstance(worst, Mapping) else "")
        title = metric_title(data.spec, key) + (" (per image)" if key in CALIBRATION_KEYS else "")
        rows.append([escape(title), _mean_cell(key, found),
                     value_text(key, found["median"]), str(found["finite"]), str(found["na"]),  # type: ignore[arg-type]
                     str(found["infinite"]), worst_text])
    header = ["metric", f"mean [{CONFIDENCE:.0%} CI]", "median", "finite", "n/a", "inf", "worst case mean / median"]
    return counts + _table(header, rows) + (
        f'<p class="muted">Means and medians are over the finite values; n/a (the metric does not apply: a class '
        f"in neither mask, precision with nothing predicted, recall with nothing to find) and inf (HD95 with the "
        f"class in only one mask) are left out and counted. The worst case substitutes, for each class's inf, the "
        f"diagonal of that image's scored ROI (the largest distance possible), an image's value being the mean "
        f"over its classes. The "
        f"interval is scipy's percentile bootstrap of the mean ({RESAMPLES:,} resamples, seed {SEED}).</p>")


def _definitions(data: ReportData, summary: Mapping[str, object]) -> str:
    rows = []
    for key in _keys(data):
        metric = catalogue.lookup(key)
        rows.append([escape(metric_title(data.spec, key)), escape(metric.scale.unit or "ratio"),
                     escape(metric.description), escape(metric.scale.reference)])
    calibration = summary.get("calibration")
    resampling = calibration.get("truth_resampling", "") if isinstance(calibration, Mapping) else ""
    note = f'<p class="muted">Calibration reads the truth at the model\'s resolution: {escape(str(resampling))}.</p>' \
        if resampling else ""
    return _table(["metric", "unit", "definition", "reference"], rows, numeric_from=99) + note


def _provenance(provenance: Mapping[str, str], notes: list[str]) -> str:
    rows = [[escape(k), escape(v)] for k, v in provenance.items()] + [["note", escape(n)] for n in notes]
    return _table(None, rows, numeric_from=99)


def _legend(data: ReportData) -> str:
    """What the thumbnails' colours mean: each class of the prediction and truth panels, each kind of error."""
    classes = "".join(f'<span class="key" style="background: rgb{class_color(index)}"></span>'
                      f"{escape(data.class_name(index))}" for index in range(1, data.num_classes))
    return (f'<p class="muted">prediction and truth: {classes}; errors:' + "".join(
        f'<span class="key" style="background: rgb{rgb}"></span>{ERROR_NAMES[kind]}'
        for kind, rgb in ERROR_COLORS.items()) + " (by class: a pixel predicted as another class is a miss, FN; "
        "each thumbnail pixel shows what covers most of it, thin ones widened to one thumbnail pixel)</p>")


def _worst(data: ReportData) -> str:
    entries = data.worst_entries()
    if not entries:
        why = "none asked for (--worst 0)" if data.worst == 0 else f"no image has a {data.rank.label} to rank by"
        return f'<p class="muted">No images: {escape(why)}.</p>'
    rows = []
    for rank, entry in enumerate(entries, 1):
        figures = "".join(f'<figure><img alt="{escape(entry.item.id)} {caption}" '
                          f'src="{data_uri(entry.thumbnails[name])}"><figcaption>{caption}</figcaption></figure>'
                          for name, caption in PANELS if name in entry.thumbnails)
        numbers = "<br>".join(f"{escape(metric_title(data.spec, key))}: {value_text(key, entry.value(key))}"
                              for key in _keys(data) if entry.value(key) is not None)
        rows.append(f"<tr><td>{rank}. <b>{escape(entry.item.id)}</b><br><span class=\"muted\">ROI {entry.roi}</span>"
                    f"<br>{numbers}</td><td>{figures}</td></tr>")
    return _legend(data) + f'<table class="worst">{"".join(rows)}</table>'


def _per_class(data: ReportData, summary: Mapping[str, object]) -> str:
    families = [("dice", "Dice"), ("iou", "IoU"), *((f"{k}_class", metric_title(data.spec, k)) for k in data.spec.keys()
                                                  if k not in CALIBRATION_KEYS)]
    rows = []
    for index in range(1, data.num_classes):
        cells = [str(index), escape(data.class_name(index))]
        for family, _ in families:
            found = _aggregate(summary, f"{family}_{index}")
            key = family.removesuffix("_class")
            if found is None:
                cells.append("n/a")
            elif "total" in found:
                cells.append(str(found["total"]))
            else:
                left = ", ".join(f"{found[k]} {k.replace('infinite', 'inf').replace('na', 'n/a')}"
                                 for k in ("infinite", "na") if found[k])
                cells.append(value_text(key, found["mean"]) + (f' <span class="muted">({left})</span>' if left else ""))  # type: ignore[arg-type]
        rows.append(cells)
    header = ["class", "name", *(f"{title} ({'sum' if family[:-6] in COUNT_KEYS else 'mean'})"
                                 for family, title in families)]
    return _table(header, rows, numeric_from=2) + (
        '<p class="muted">Each class one-vs-rest; an image where the class is in neither mask is n/a for it: left '
        "out of the mean and counted, never scored 1; an infinite HD95 is left out and counted too.</p>")


def _defects(summary: Mapping[str, object]) -> str:
    defects = summary.get("defects")
    if not isinstance(defects, Mapping):
        return '<p class="muted">Not computed (add defect_f1 to --metrics).</p>'
    rows = [[k, str(defects[k])] for k in ("tp", "fp", "fn", "merged", "split")]
    rows += [[k, value_text("defect_f1", defects[k])] for k in ("f1", "precision", "recall")]
    return _table(["summed over all images", ""], rows) + (
        f'<p class="muted">TP: a true defect matched one to one by a predicted one at IoU ≥ {summary["defect_iou"]:g}; '
        "FP: a predicted defect nothing matches that lies mostly outside every true defect; FN: a missed defect "
        "(merged: of those, defects lying mostly inside one prediction that holds another true defect too); split: "
        "unmatched pieces lying mostly inside one true defect (fragments, not false alarms). Components of at least "
        f"{summary['min_defect_area_px']} px, 8-connected.</p>")


def _calibration(summary: Mapping[str, object], plots: Mapping[str, bytes]) -> str:
    calibration = summary.get("calibration")
    if not isinstance(calibration, Mapping):
        return '<p class="muted">Not computed (add ece to --metrics).</p>'
    rows = [["ECE (pooled), every pixel", value_text("ece", calibration["ece"])],
            ["ECE (pooled), foreground (truth or prediction)", value_text("ece", calibration["ece_foreground"])],
            ["Brier score (pooled)", value_text("brier", calibration["brier"])],
            ["pixels", f"{calibration['pixels']:,}"]]
    images = "".join(f'<img class="plot" alt="{name}" src="{data_uri(plots[name])}">'
                     for name in ("reliability", "reliability_foreground") if name in plots)
    return _table(["all images' pixels pooled", ""], rows) + (
        '<p class="muted">Pooled: one calibration over every image\'s pixels together (large images weigh more), not '
        "the mean of the images' values that the summary's rows marked (per image) give.</p>") + images


def _review(data: ReportData) -> str:
    """The top of the disagreement queue (`core.review.queue`)."""
    entries = data.review.entries()
    if not entries:
        return '<p class="muted">No disagreement between the predictions and the truths.</p>'
    rows = [[str(rank), escape(e.image), e.kind.replace("_", " "), escape(e.what(data.class_names)),
             ", ".join(map(str, e.bbox)), str(e.area), f"{e.score:.3f}"] for rank, e in enumerate(entries, 1)]
    return _table(["#", "image", "kind", "class", "box x0, y0, x1, y1 (slide px)", "area (px)", "score"], rows,
                  numeric_from=4) + (
        f'<p class="muted">The {len(entries)} most suspicious of {data.review.total} places where a prediction and '
        "its truth disagree (connected components per class, as the defects are counted): score = the model's mean "
        "margin for its decision against the truth over the disagreeing pixels x area / (area + "
        f"{AREA_HALF}), so a confident model against the truth (a likely label error) and a large miss come first. "
        "Every one: segscope review --dataset DIR (--json, --csv); in the viewer, Inspect > Review queue "
        "(Ctrl+Shift+Q) steps through them, one key per decision.</p>")


def _cell(key: str, value: float | None) -> str:
    sort_value = "" if value is None else "Infinity" if math.isinf(value) else repr(value)
    return f'<td class="n" data-v="{sort_value}">{value_text(key, value)}</td>'


def _table_title(data: ReportData) -> str:
    """The heading of the page's table: every image with a mask, or the worst of them (`ReportData.rows`)."""
    shown, scored = len(data.table_entries()), data.summary.images
    rank = escape(metric_title(data.spec, data.rank.name))
    if shown == scored:
        return f"Every image with a mask ({scored}), the worst first by {rank}"
    return f"The {shown} worst of the {scored} images with a mask by {rank}"


def _all_images(data: ReportData, csv_name: str) -> str:
    keys = _keys(data)
    head = "".join(f'<th data-key="{escape(k)}">{escape(metric_title(data.spec, k, short=True))}</th>' for k in keys)
    rows = []
    for e in data.table_entries():
        truth = e.truth.kind if e.truth is not None else ""
        rows.append(f'<tr><td data-v="{escape(e.item.id)}">{escape(e.item.id)}</td><td data-v="{e.roi}">{e.roi}</td>'
                    f'<td data-v="{truth}">{truth}</td>' + "".join(_cell(k, e.value(k)) for k in keys) + "</tr>")
    left_out = data.summary.images - len(rows)
    rest = (f" The other {left_out} (and the images without a mask) are " if left_out else
            " They are, with the images without a mask, ")
    return (f'<p class="muted">Click a column to sort (again: the other way); n/a sorts last. Images where '
            f'{escape(metric_title(data.spec, data.rank.name))} is n/a come after every other.{rest}in '
            f'<b>{escape(csv_name)}</b> beside this page: a row per image, as eval --export writes metrics.csv.</p>'
            '<table class="sortable"><thead><tr><th data-key="image">image</th><th data-key="roi">ROI</th>'
            '<th data-key="truth">truth</th>'
            f'{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _listed(items: list[str], more: int, where: str) -> str:
    """`items` as a list (None. when empty), and how many more there were, found `where`."""
    if not items:
        return '<p class="muted">None.</p>'
    return ("<ul>" + "".join(f"<li>{escape(i)}</li>" for i in items) + "</ul>"
            + (f'<p class="muted">... and {more} more{where}.</p>' if more else ""))


def _lists(data: ReportData, csv_name: str) -> str:
    without = data.images - data.summary.images
    return "".join(["<h3>Images without masks</h3>",
                    _listed(data.without_masks, without - len(data.without_masks), f" (in {escape(csv_name)})"),
                    "<h3>Warnings</h3>", _listed(data.warnings, data.more_warnings, " (on the command's stderr)")])


def render(data: ReportData, summary: Mapping[str, object], provenance: Mapping[str, str],
           plots: Mapping[str, bytes], csv_name: str) -> str:
    """The whole page. `plots`: "distributions" and, with ECE, "reliability" and "reliability_foreground" PNGs;
    `csv_name`: the file beside the page holding every image's row."""
    title = f"SegScope report: {data.dataset.root.name}"
    rank = metric_title(data.spec, data.rank.name)
    direction = "lowest" if data.rank.higher_is_better else "highest"
    sections = [
        f"<h1>{escape(title)}</h1><p class=\"muted\">{escape(provenance.get('created', ''))}</p>",
        "<h2>Run summary</h2>", _summary(data, summary),
        "<h2>Definitions</h2>", _definitions(data, summary),
        "<h2>Provenance</h2>", _provenance(provenance, data.notes),
        "<h2>Distributions</h2>",
        f'<img class="plot" alt="per-metric distributions" src="{data_uri(plots["distributions"])}">',
        f"<h2>Worst {len(data.worst_entries())} images by {escape(rank)} ({direction} first)</h2>", _worst(data),
        "<h2>Per class</h2>", _per_class(data, summary),
        "<h2>Defects</h2>", _defects(summary),
        "<h2>Review queue: likely label errors and costly misses first</h2>", _review(data),
        "<h2>Calibration</h2>", _calibration(summary, plots),
        f"<h2>{_table_title(data)}</h2>", _all_images(data, csv_name),
        "<h2>Images without masks, warnings</h2>", _lists(data, csv_name),
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(sections) + f"\n<script>{SCRIPT}</script>\n</body></html>\n")
