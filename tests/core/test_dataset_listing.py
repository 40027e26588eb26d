"""Opening a dataset from one listing per folder finds what asking the file system about every candidate name
found: the same items, in the same order, with the same masks and the same files left out. Discovery reads no
file's content, so most files here are empty."""

from __future__ import annotations

import os
import string
from pathlib import Path, PurePath

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from listing_reference import _natural_key as reference_key
from listing_reference import discover_by_stat

from segscope.core.dataset.dataset import Dataset, discover, natural_order
from segscope.core.errors import SegScopeError
from segscope.core.export.names import stem_suffix


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def case_sensitive(folder: Path) -> bool:
    probe = touch(folder / "probe_case.txt")
    try:
        return not (folder / "PROBE_CASE.txt").exists()
    finally:
        probe.unlink()


def found(root: Path) -> list[tuple[str, str, str | None]]:
    return [(i.id, i.image_path.relative_to(root).as_posix(),
             i.mask_path.relative_to(root).as_posix() if i.mask_path else None) for i in discover(root)]


def test_the_first_suffix_in_the_preferred_order_wins_for_images_and_masks(tmp_path):
    for name in ("a/image.jpg", "a/image.png", "a/mask.tif", "a/mask.bmp", "b/image.tif", "b/image.jpg",
                 "b/mask.tif", "c/image.svs", "c/mask.png", "c/mask.jpeg"):
        touch(tmp_path / name)
    for name in ("x.jpg", "x_mask.tif", "x_mask.png", "y.tif", "y_mask.webp"):
        touch(tmp_path / name)
    # IMAGE_SUFFIXES order: .png .jpg .jpeg .tif .tiff ... .bmp .webp ... .svs
    assert found(tmp_path) == [("a", "a/image.png", "a/mask.tif"), ("b", "b/image.jpg", "b/mask.tif"),
                               ("c", "c/image.svs", "c/mask.png"), ("x", "x.jpg", "x_mask.png"),
                               ("y", "y.tif", "y_mask.webp")]


def test_suffix_case(tmp_path):
    """A flat image's suffix is matched in any case; mask and folder-layout names are looked up as spelt (.png),
    which a case-insensitive file system also finds under another case, as it did before."""
    for name in ("A.PNG", "A_mask.PNG", "B.Jpg", "B_mask.png", "c/IMAGE.png", "d/image.PNG", "d/mask.PNG"):
        touch(tmp_path / name)
    if case_sensitive(tmp_path):
        expected = [("A", "A.PNG", None), ("B", "B.Jpg", "B_mask.png")]
    else:  # found as the name asked for
        expected = [("c", "c/image.png", None), ("d", "d/image.png", "d/mask.png"), ("A", "A.PNG", "A_mask.png"),
                    ("B", "B.Jpg", "B_mask.png")]
    assert found(tmp_path) == expected
    assert discover(tmp_path) == discover_by_stat(tmp_path)


def test_masks_backups_corrections_and_exports_are_not_images(tmp_path):
    for name in ("img1.png", "img1_mask.png", "img1_mask.orig.png", "img1_mask_corrected.png",
                 "lonely_mask.png", "lonely_mask.orig.tif",
                 # an export beside its provenance: never data, neither image nor mask
                 "img2.png", "img2_mask.png", "img2_heatmap.png", "img2_mask_full.png", "img2_provenance.json",
                 # named like an export but without a provenance file: an image of its own
                 "img3_heatmap.png",
                 # a provenance that is a folder is no provenance
                 "img4.png", "img4_mask.png", "img4_provenance.json/x.txt",
                 # names that are not images by their suffix
                 ".png", "notes.txt", "img5.png.bak"):
        touch(tmp_path / name)
    assert found(tmp_path) == [("img1", "img1.png", "img1_mask.png"), ("img2", "img2.png", None),
                               ("img3_heatmap", "img3_heatmap.png", None), ("img4", "img4.png", "img4_mask.png")]


def test_without_any_provenance_file_names_like_exports_are_data(tmp_path):
    """No provenance anywhere (the usual dataset, read without parsing a name as an export's): an image named like
    an export is an image, and a mask named like an exported mask is its image's mask; once one provenance file
    appears (in another case too, where the file system ignores case), its item's exports are left out."""
    for name in ("img1.png", "img1_mask.png", "img2_heatmap.png", "img3_mask_full.png"):
        touch(tmp_path / name)
    assert found(tmp_path) == [("img1", "img1.png", "img1_mask.png"), ("img2_heatmap", "img2_heatmap.png", None),
                               ("img3_mask_full", "img3_mask_full.png", None)]
    touch(tmp_path / "img1_PROVENANCE.json")
    assert discover(tmp_path) == discover_by_stat(tmp_path)
    touch(tmp_path / "img2_provenance.json")
    assert found(tmp_path) == [("img1", "img1.png", "img1_mask.png") if case_sensitive(tmp_path) else
                               ("img1", "img1.png", None), ("img3_mask_full", "img3_mask_full.png", None)]
    assert discover(tmp_path) == discover_by_stat(tmp_path)


def test_links_folders_and_natural_order(tmp_path):
    target = touch(tmp_path.parent / f"{tmp_path.name}-outside" / "real.png")
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "image.png").symlink_to(tmp_path / "nowhere.png")  # broken: the next suffix is looked for
    touch(tmp_path / "1" / "image.jpg")
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "image.png").symlink_to(target)
    (tmp_path / "2" / "mask.png").symlink_to(tmp_path / "nowhere.png")  # broken: the mask, said when it is read
    (tmp_path / "3" / "image.png").mkdir(parents=True)  # a folder where the image goes: taken, reported when read
    (tmp_path / "10").symlink_to(tmp_path / "2", target_is_directory=True)  # a link to a folder is a folder
    (tmp_path / "img1.png").symlink_to(target)  # flat: a link to a file is a file
    (tmp_path / "img11.png").mkdir()  # a folder with an image name, without image.*: neither
    assert found(tmp_path) == [("1", "1/image.jpg", None), ("2", "2/image.png", "2/mask.png"),
                               ("3", "3/image.png", None), ("10", "10/image.png", "10/mask.png"),
                               ("img1", "img1.png", None)]
    assert discover(tmp_path) == discover_by_stat(tmp_path)


@pytest.mark.parametrize("broken", ["4/image.png", "4", "img2.png"])
def test_an_image_or_its_folder_linked_to_nothing_is_said_never_skipped(tmp_path, broken):
    """eval refuses the dataset naming the link (a run must not leave an image out without a word); the viewer
    opens the rest, the link a row that says why."""
    touch(tmp_path / "1" / "image.png")
    link = tmp_path / broken
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(tmp_path / "nowhere", target_is_directory=broken == "4")
    with pytest.raises(SegScopeError, match=f"^{link}: a symbolic link to {tmp_path / 'nowhere'}, which does not "
                                            "exist; restore its target or remove the link$"):
        Dataset.open(tmp_path)
    items = Dataset.open(tmp_path, partial=True).items
    assert [(i.id, i.image_path, bool(i.problem)) for i in items] == [
        ("1", tmp_path / "1" / "image.png", False), (Path(broken).parts[0].removesuffix(".png"), link, True)]


def test_a_folder_with_a_mask_but_no_image_is_said_never_skipped(tmp_path):
    """A misnamed image (img.png beside mask.png) left its folder out of the run without a word."""
    touch(tmp_path / "1" / "image.png")
    touch(tmp_path / "2" / "img.png")
    touch(tmp_path / "2" / "mask.png")
    mask = tmp_path / "2" / "mask.png"
    with pytest.raises(SegScopeError, match=f"^{mask}: a mask without its image beside it .*add the image"):
        Dataset.open(tmp_path)
    assert [(i.id, bool(i.problem)) for i in Dataset.open(tmp_path, partial=True).items] == [("1", False),
                                                                                             ("2", True)]
    (tmp_path / "1" / "image.png").unlink()  # nothing else: the mask is named, not "no images found"
    with pytest.raises(SegScopeError, match=f"^{mask}: a mask without its image"):
        Dataset.open(tmp_path)


def test_a_mask_linked_to_nothing_is_said_when_read_not_taken_for_no_mask(tmp_path):
    touch(tmp_path / "1" / "image.png")
    (tmp_path / "1" / "mask.png").symlink_to(tmp_path / "nowhere.png")
    dataset = Dataset.open(tmp_path)
    with pytest.raises(SegScopeError, match=str(tmp_path / "1" / "mask.png")):
        dataset.load_mask(dataset.items[0])


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads any folder")
def test_a_folder_that_can_be_searched_but_not_listed_is_still_read(tmp_path):
    touch(tmp_path / "a" / "image.png")
    touch(tmp_path / "a" / "mask.png")
    (tmp_path / "a").chmod(0o311)  # no read permission: no listing, yet each name can be looked up
    try:
        assert found(tmp_path) == [("a", "a/image.png", "a/mask.png")]
    finally:
        (tmp_path / "a").chmod(0o755)


def test_a_subfolder_the_listing_cannot_read_is_asked_name_by_name(tmp_path, monkeypatch):
    touch(tmp_path / "a" / "image.jpg")
    touch(tmp_path / "a" / "mask.tif")
    touch(tmp_path / "b" / "image.png")
    listed = os.scandir

    def scandir(path: object) -> object:
        if Path(str(path)).name == "a":
            raise PermissionError(13, "Permission denied", str(path))
        return listed(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert found(tmp_path) == [("a", "a/image.jpg", "a/mask.tif"), ("b", "b/image.png", None)]


def test_an_unreadable_dataset_folder_is_one_line(tmp_path, monkeypatch):
    touch(tmp_path / "a.png")

    def refused(path: object) -> object:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "scandir", refused)
    with pytest.raises(SegScopeError, match="cannot read the dataset folder") as info:
        Dataset.open(tmp_path)
    assert str(tmp_path) in str(info.value)


_STEMS = ["image", "mask", "a", "a_mask", "a_mask.orig", "a_mask_corrected", "a_heatmap", "a_provenance", "b", "b_mask",
          "10", "2", "Image", "MASK", "x_mask_full", ""]
_SUFFIXES = [".png", ".PNG", ".jpg", ".tif", ".json", ".txt", ".svs", ".Png", ""]
_name = st.builds(lambda stem, suffix: stem + suffix, st.sampled_from(_STEMS), st.sampled_from(_SUFFIXES)).filter(
    lambda n: n not in ("", ".", ".."))
_kind = st.sampled_from(["file", "file", "file", "folder", "link", "broken link"])
_tree = st.lists(st.tuples(st.sampled_from(["", "1", "2", "10", "a", "b"]), _name, _kind), max_size=24)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=_tree)
def test_one_listing_finds_what_a_stat_per_name_found(tmp_path_factory, tree):
    root = tmp_path_factory.mktemp("listing")
    target = touch(root.parent / f"{root.name}-target.png")
    for folder, name, kind in tree:
        path = root / folder / name
        parent = root / folder
        if os.path.lexists(path) or parent.is_symlink() or (os.path.lexists(parent) and not parent.is_dir()):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "file":
            touch(path)
        elif kind == "folder":
            path.mkdir()
        else:
            path.symlink_to(target if kind == "link" else root / "nowhere")

    def seen(items: list) -> list:
        return [(i.id, i.image_path, i.mask_path, bool(i.problem)) for i in items]

    assert seen(discover(root, partial=True)) == seen(discover_by_stat(root, partial=True))
    try:
        expected = discover_by_stat(root)
    except SegScopeError:
        with pytest.raises(SegScopeError):
            discover(root)
    else:
        assert discover(root) == expected


@given(st.text(alphabet=string.ascii_letters + "._- ", min_size=1, max_size=12).filter(lambda n: n not in (".", "..")))
def test_stem_and_suffix_are_pathlibs(name):
    assert stem_suffix(name) == (PurePath(name).stem, PurePath(name).suffix)


#: Name pieces that test natural order's corners: digit runs with leading zeros and of many lengths, letters of
#: both cases, characters below and above the digits ("-", ".", " ", "_", "~"), and a few that are not ASCII.
_piece = st.one_of(st.from_regex(r"0{0,3}[0-9]{1,12}", fullmatch=True), st.sampled_from(list("aAbBzZ-. _~")),
                   st.sampled_from(["img", "IMG", "mask", "é", "Σ", "٣"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_piece, min_size=1, max_size=6).map("".join), max_size=40, unique=True))
def test_natural_order_is_the_sort_by_the_reference_key(names):
    """Natural order as the reference gives it (a list of parts: text lowered, digit runs as numbers; equal keys
    in the order given), whatever the names, ASCII or not."""
    assert natural_order(names) == sorted(names, key=reference_key)


@pytest.mark.parametrize("collecting", [True, False])
def test_a_listing_leaves_the_garbage_collector_as_it_found_it(tmp_path, collecting):
    """The collector is paused while a listing builds its items: it runs again afterwards (also after a listing that
    fails, and after two that overlap), and one its owner paused stays paused."""
    import gc
    import threading

    from segscope.core.dataset import dataset as listing_module

    touch(tmp_path / "a.png")
    seen: list[bool] = []
    inner = threading.Event()

    def overlapping() -> None:  # a second listing, in another thread, while the first one lists
        with listing_module._collection_paused():
            inner.set()
            seen.append(gc.isenabled())

    gc.enable() if collecting else gc.disable()
    try:
        with listing_module._collection_paused():
            seen.append(gc.isenabled())
            thread = threading.Thread(target=overlapping)
            thread.start()
            thread.join(30)
            assert inner.is_set()
            seen.append(gc.isenabled())  # the other ended: this one still lists
        assert [i.id for i in discover(tmp_path)] == ["a"]
        with pytest.raises(OSError):
            discover(tmp_path / "missing")  # (a listing that fails)
        assert seen == [False, False, False] and gc.isenabled() == collecting
    finally:
        gc.enable()


def test_a_large_listing_takes_what_is_alive_out_of_the_collectors_full_walks(tmp_path, monkeypatch):
    """A listing of `COLLECT_EVERY` images or more freezes what is alive (a full walk of a viewer's heap after it
    held the interpreter lock for seconds); a smaller one leaves the collector's generations as they are."""
    import gc

    from segscope.core.dataset import dataset as listing_module

    for name in ("a", "b", "c"):
        touch(tmp_path / f"{name}.png")
    monkeypatch.setattr(listing_module, "COLLECT_EVERY", 4)
    gc.unfreeze()
    try:
        assert len(listing_module.discover(tmp_path)) == 3 and gc.get_freeze_count() == 0  # 3 < 4
        touch(tmp_path / "d.png")
        assert len(listing_module.discover(tmp_path)) == 4 and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
