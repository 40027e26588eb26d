"""The report as one self-contained HTML file: styles inline, every image and plot a `data:` URI, and a
Content-Security-Policy that lets the page load nothing from anywhere, so it reads the same mailed or offline."""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from html import escape

import numpy as np

from ..metrics import catalogue
from ..quality.options import value_text
from ..quality.spec import COUNT_KEYS, MetricSpec
from .collect import Entry, ReportData

PANELS = (("image", "image"), ("heatmap", "heatmap"), ("mask", "prediction"), ("truth", "truth"))
POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1d2230; margin: 24px auto; max-width: 1180px; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 2px; } h2 { font-size: 17px; margin-top: 30px; border-bottom: 1px solid #ccd; }
table { border-collapse: collapse; margin: 8px 0; } td, th { padding: 3px 9px; border-bottom: 1px solid #e3e5ec; }
th { text-align: left; background: #f3f4f8; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #667; } .worst td { vertical-align: top; } figure { display: inline-block; margin: 0 6px 0 0; }
figcaption { font-size: 11px; color: #667; text-align: center; } img.plot { max-width: 100%; }
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
    return ["soft_dice", "foreground_dice", "foreground_iou", *data.spec.keys()]


def metric_title(spec: MetricSpec, key: str) -> str:
    """A metric's title in the report (NSD with its tolerance)."""
    return f"NSD@{spec.nsd_tolerance:g}" if key == "nsd" else catalogue.lookup(key).title


def _label(data: ReportData, key: str) -> str:
    return metric_title(data.spec, key)


def _summary(data: ReportData, summary: Mapping[str, object]) -> str:
    """Counts, then each metric's mean (the catalogue's, in `summary`) and median over the images where it
    applies."""
    scored = [e for e in data.entries if e.metrics is not None]
    rows = [["images", str(len(data.entries))], ["with masks", str(len(scored))],
            ["without masks", str(len(data.entries) - len(scored))]]
    for key in _keys(data):
        if key in COUNT_KEYS:
            continue
        values = [v for e in scored if (v := e.value(key)) is not None]
        mean = summary.get(key)
        median = float(np.median(values)) if values else None
        rows.append([escape(_label(data, key)), f"mean {value_text(key, mean if isinstance(mean, float) else None)}, "
                                                 f"median {value_text(key, median)}"])
    return _table(None, rows)


def _provenance(provenance: Mapping[str, str], notes: list[str]) -> str:
    rows = [[escape(k), escape(v)] for k, v in provenance.items()] + [["note", escape(n)] for n in notes]
    return _table(None, rows, numeric_from=99)


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
        numbers = "<br>".join(f"{escape(_label(data, key))}: {value_text(key, entry.value(key))}"
                              for key in _keys(data) if entry.value(key) is not None)
        rows.append(f"<tr><td>{rank}. <b>{escape(entry.item.id)}</b><br><span class=\"muted\">ROI {entry.roi}</span>"
                    f"<br>{numbers}</td><td>{figures}</td></tr>")
    return f'<table class="worst">{"".join(rows)}</table>'


def _per_class(data: ReportData) -> str:
    scored = [e for e in data.entries if e.metrics is not None]
    keys = [k for k in data.spec.keys() if k != "ece"]
    rows = []
    for index in range(1, data.num_classes):
        cells = [f"{index}", escape(data.class_name(index))]
        cells += [value_text("foreground_dice", _mean(e.metrics.dice[index] for e in scored if e.metrics)),
                  value_text("foreground_iou", _mean(e.metrics.iou[index] for e in scored if e.metrics))]
        for key in keys:
            found = [v for e in scored if (v := _class_value(e, index, key)) is not None and not math.isnan(v)]
            cells.append(value_text(key, _CLASS_SUMMARIES[_class_summary(key)](found) if found else None))
        rows.append(cells)
    header = ["class", "name", "Dice (mean)", "IoU (mean)",
              *(f"{_label(data, k)} ({_class_summary(k)})" for k in keys)]
    return _table(header, rows, numeric_from=2)


#: How the per-class table sums up a metric over the images: counts add up, HD95 (infinite when one mask
#: lacks the class) by its median, the rest by their mean.
_CLASS_SUMMARIES = {"sum": lambda v: float(np.sum(v)), "median": lambda v: float(np.median(v)),
                    "mean": lambda v: float(np.mean(v))}


def _class_summary(key: str) -> str:
    return "sum" if key in COUNT_KEYS else "median" if key == "hd95" else "mean"


def _class_value(entry: Entry, index: int, key: str) -> float | None:
    quality = entry.metrics.quality if entry.metrics is not None else None
    return None if quality is None else quality.per_class[index].get(key)


def _mean(values: Iterable[float]) -> float | None:
    found = list(values)
    return float(np.mean(found)) if found else None


def _defects(summary: Mapping[str, object]) -> str:
    defects = summary.get("defects")
    if not isinstance(defects, Mapping):
        return '<p class="muted">Not computed (add defect_f1 to --metrics).</p>'
    rows = [[k, str(defects[k])] for k in ("tp", "fp", "fn")]
    rows += [[k, f"{defects[k]:.4f}"] for k in ("f1", "precision", "recall")]
    return _table(["summed over all images", ""], rows) + \
        '<p class="muted">TP: a true defect matched one to one by a predicted one at IoU ≥ 0.5; FP: a predicted ' \
        "defect nothing matches; FN: a missed defect.</p>"


def _all_images(data: ReportData) -> str:
    keys = _keys(data)
    rows = [[escape(e.item.id), str(e.roi)] + [value_text(k, e.value(k)) for k in keys]
            for e in data.entries if e.metrics is not None]
    return _table(["image", "ROI", *(_label(data, k) for k in keys)], rows, numeric_from=2)


def _lists(data: ReportData) -> str:
    missing = [e.item for e in data.entries if e.metrics is None]
    parts = ["<h3>Images without masks</h3>",
             "<ul>" + "".join(f"<li>{escape(i.id)} <span class=\"muted\">{escape(str(i.image_path))}</span></li>"
                              for i in missing) + "</ul>" if missing else '<p class="muted">None.</p>',
             "<h3>Warnings</h3>",
             "<ul>" + "".join(f"<li>{escape(w)}</li>" for w in data.warnings) + "</ul>" if data.warnings
             else '<p class="muted">None.</p>']
    return "".join(parts)


def render(data: ReportData, summary: Mapping[str, object], provenance: Mapping[str, str],
           plots: Mapping[str, bytes]) -> str:
    """The whole page. `plots`: "distributions" and, with ECE, "reliability" PNGs."""
    title = f"SegScope report: {data.dataset.root.name}"
    reliability = (f'<img class="plot" alt="reliability diagram" src="{data_uri(plots["reliability"])}">'
                   if "reliability" in plots else '<p class="muted">Not computed (add ece to --metrics).</p>')
    rank = _label(data, data.rank.name)
    direction = "lowest" if data.rank.higher_is_better else "highest"
    sections = [
        f"<h1>{escape(title)}</h1><p class=\"muted\">{escape(provenance.get('created', ''))}</p>",
        "<h2>Run summary</h2>", _summary(data, summary),
        "<h2>Provenance</h2>", _provenance(provenance, data.notes),
        "<h2>Distributions</h2>",
        f'<img class="plot" alt="per-metric distributions" src="{data_uri(plots["distributions"])}">',
        f"<h2>Worst {len(data.worst_entries())} images by {escape(rank)} ({direction} first)</h2>", _worst(data),
        "<h2>Per class</h2>", _per_class(data),
        "<h2>Defects</h2>", _defects(summary),
        "<h2>Reliability diagram</h2>", reliability,
        "<h2>Every image with a mask</h2>", _all_images(data),
        "<h2>Images without masks, warnings</h2>", _lists(data),
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(sections) + "\n</body></html>\n")

