"""The dataset list as a view of the session: each row is `core.session.views.item_view` of its image (its status,
its numbers, whether they are fresh, the truth they are scored against), derived when the table first reads it
and read again once the session says something it derives from changed (`item_changed`, `items_changed`); the
rows changed since the last redraw are redrawn together, at a bounded rate (`gui/runtime/coalesce.py`), however
fast a run announces them."""

from __future__ import annotations

from ...core.dataset.dataset import Dataset
from ...core.session.session import Session
from ...core.session.views import ItemView, item_view
from ..docks.dataset_panel import DatasetPanel
from ..runtime.coalesce import Coalescer


class RowStatus:
    """Fills `panel`'s table from `session`: every row (lazily) when a dataset opens, the changed ones at most
    every `coalesce.REFRESH_MS`."""

    def __init__(self, session: Session, panel: DatasetPanel) -> None:
        self.session, self.panel = session, panel
        self.refresh = Coalescer(panel.model.show_changed, parent=panel)
        session.events.dataset.connect(self._on_dataset)
        session.events.item_changed.connect(lambda changed: self._on_items_changed((changed.item_id,)))
        session.events.items_changed.connect(lambda changed: self._on_items_changed(changed.item_ids))

    def _on_dataset(self, dataset: Dataset | None, _old: Dataset | None) -> None:
        if dataset is None:
            return
        self.panel.set_dataset(dataset.root, dataset.ids, self.view_of, dataset.positions)
        self.panel.select_row(0)

    def _on_items_changed(self, item_ids: tuple[str, ...]) -> None:
        for item_id in item_ids:
            self.panel.model.changed(item_id)  # (read again at once: only the redraw waits)
        self.refresh.request()

    def view_of(self, item_id: str) -> ItemView | None:
        """The row of `item_id` as the session derives it now (None: no dataset is open)."""
        return item_view(self.session, item_id) if self.session.dataset is not None else None
