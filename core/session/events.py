"""What a session announces (`Session.events`): views subscribe to these and call the session."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..events import Event


@dataclass
class SessionEvents:
    """What views subscribe to; the arguments are in each comment."""

    dataset_opened: Event = field(default_factory=lambda: Event("dataset_opened"))  # (dataset)
    current_changed: Event = field(default_factory=lambda: Event("current_changed"))  # (item or None)
    slide_loaded: Event = field(default_factory=lambda: Event("slide_loaded"))  # (item)
    roi_changed: Event = field(default_factory=lambda: Event("roi_changed"))  # (item id, roi)
    result_added: Event = field(default_factory=lambda: Event("result_added"))  # (item id, RunRecord)
    result_restored: Event = field(default_factory=lambda: Event("result_restored"))  # (item id, RunRecord)
    metrics_changed: Event = field(default_factory=lambda: Event("metrics_changed"))  # (item id, metrics|None)
    metrics_stale: Event = field(default_factory=lambda: Event("metrics_stale"))  # (item id): a re-score is due
    store_failed: Event = field(default_factory=lambda: Event("store_failed"))  # (message)
    document_changed: Event = field(default_factory=lambda: Event("document_changed"))  # (MaskDocument, kind)
    slide_run_added: Event = field(default_factory=lambda: Event("slide_run_added"))  # (TiledEvaluation, restored)
    ranking_changed: Event = field(default_factory=lambda: Event("ranking_changed"))  # (Metric)
