"""Masks as the files other tools read: QuPath GeoJSON (`geojson.py`) and COCO RLE (`coco.py`)."""
