"""The dataset list as a view of the session: each row is `core.session.views.item_view` of its image (its status,
its numbers, whether they are fresh, the truth they are scored against), redrawn whenever the session says
something it derives from changed (`item_changed`, `items_changed`)."""

from __future__ import annotations

from ..core.dataset.dataset import Dataset
from ..core.session.session import Session
from ..core.session.views import item_view
from .dataset_panel import DatasetPanel


class RowStatus:
    """Fills `panel`'s table from `session`: all rows when a dataset opens, one row per `item_changed`."""

    def __init__(self, session: Session, panel: DatasetPanel) -> None:
        self.session, self.panel = session, panel
        session.events.dataset.connect(self._on_dataset)
        session.events.item_changed.connect(lambda changed: self.show(changed.item_id))
        session.events.items_changed.connect(lambda changed: self.show_all(changed.item_ids))

    def _on_dataset(self, dataset: Dataset | None, _old: Dataset | None) -> None:
        if dataset is None:
            return
        self.panel.set_dataset(dataset.root, [item.id for item in dataset.items])
        for item in dataset.items:
            self.show(item.id)
        self.panel.select_row(0)

    def show_all(self, item_ids: tuple[str, ...]) -> None:
        for item_id in item_ids:
            self.show(item_id)

    def show(self, item_id: str) -> None:
        if self.session.dataset is not None and self.panel.model.has(item_id):
            self.panel.model.show(item_view(self.session, item_id))
