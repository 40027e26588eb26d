"""Every image type SegScope reads, in one place: its name and the file name endings a dataset looks for.

Dataset discovery (`core.dataset`) takes files by these endings; the readers (`core.slides`) then read each
by its content (`core.files.imageheader`), so a TIFF named `.png` is still read as a TIFF. Messages that say
what a folder should hold ("no images found", a wrong file) name the types from here.
"""

from __future__ import annotations

#: Decoded by OpenCV (plain TIFF too) or, tiled and pyramidal TIFF, read region by region by tifffile.
RASTER_TYPES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("PNG", (".png",)), ("JPEG", (".jpg", ".jpeg")), ("TIFF", (".tif", ".tiff", ".btf", ".tf8")), ("BMP", (".bmp",)),
    ("WebP", (".webp",)), ("GIF", (".gif",)), ("PNM", (".pnm", ".pbm", ".pgm", ".ppm")),
)
#: Vendor whole-slide formats, read by OpenSlide (`pip install "segscope[slides]"`).
SLIDE_TYPES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("SVS", (".svs",)), ("NDPI", (".ndpi",)), ("MRXS", (".mrxs",)), ("SCN", (".scn",)), ("VMS", (".vms", ".vmu")),
    ("BIF", (".bif",)), ("SVSLIDE", (".svslide",)),
)
#: File name endings of images and slides, in the order a dataset prefers them (`image.png` before `image.jpg`).
IMAGE_SUFFIXES = tuple(suffix for _, suffixes in RASTER_TYPES + SLIDE_TYPES for suffix in suffixes)


def image_types() -> str:
    """The types read, for a message: "PNG, JPEG, ..., PNM images or SVS, ..., SVSLIDE slides: .png, .jpg, ..."."""
    raster, slides = (", ".join(name for name, _ in types) for types in (RASTER_TYPES, SLIDE_TYPES))
    return f"{raster} images or {slides} slides: {' '.join(IMAGE_SUFFIXES)}"
