"""Converters on Apache Beam's DirectRunner: the same shards, byte for byte, as on local
threads; broken images left out and named the same way; ``inspect --verify`` on Beam writes the
same manifest."""

import os
from pathlib import Path

import pytest
from converter_files import QUIET, random_image, save_image, write_file

from object_input.converters import (
    ConversionError,
    WriteOptions,
    convert_coco,
    convert_csv,
    convert_folders,
    convert_voc,
)

pytest.importorskip("apache_beam")

# Two worker threads. Beam pickles every step even then (its pipeline is a protobuf), so the
# builds that run here are the ones a cluster's workers would unpickle.
THREADS = {"runner": "DirectRunner", "num_workers": 2}


def _same_output(local, on_beam):
    """Both results say the same and their shards and label maps hold the same bytes."""
    assert [Path(p).name for p in on_beam.paths] == [Path(p).name for p in local.paths]
    for mine, theirs in zip(local.paths, on_beam.paths, strict=True):
        assert Path(mine).read_bytes() == Path(theirs).read_bytes(), theirs
    assert Path(local.label_map_path).read_text() == Path(on_beam.label_map_path).read_text()
    for field in ("label_map", "num_examples", "num_boxes", "skipped", "left_out"):
        assert getattr(on_beam, field) == getattr(local, field), field


def test_coco_on_beam_writes_the_local_shards(coco, tmp_path):
    path, images_dir, _ = coco
    local = convert_coco(path, images_dir, tmp_path / "local" / "train", num_shards=2, **QUIET)
    on_beam = convert_coco(
        path, images_dir, tmp_path / "beam" / "train", num_shards=2, **THREADS, **QUIET
    )
    _same_output(local, on_beam)
    assert (on_beam.num_examples, on_beam.num_boxes) == (3, 4)


def test_voc_with_broken_images_on_beam(broken_voc, tmp_path):
    voc_root, reasons = broken_voc
    local = convert_voc(voc_root, tmp_path / "local" / "voc", num_shards=2, **QUIET)
    on_beam = convert_voc(voc_root, tmp_path / "beam" / "voc", num_shards=2, **THREADS, **QUIET)
    _same_output(local, on_beam)
    assert on_beam.left_out == reasons
    # The three left out come before others in the seeded order: the shards still match.
    assert (on_beam.num_examples, on_beam.num_boxes) == (3, 3)


def test_csv_and_folders_on_beam_more_shards_than_images(tmp_path, rng):
    images = tmp_path / "img"
    for name in ("a.png", "b.jpg", "c.png"):
        save_image(images / name, random_image(rng, 12, 16))
    rows = (
        "filename,width,height,class,xmin,ymin,xmax,ymax\n"
        "a.png,16,12,x,1,1,9,9\nb.jpg,16,12,y,2,2,9,9\nc.png,16,12,x,3,1,9,9\n"
    )
    table = write_file(tmp_path / "boxes.csv", rows)
    local = convert_csv(table, images, tmp_path / "local" / "csv", num_shards=5, **QUIET)
    on_beam = convert_csv(table, images, tmp_path / "beam" / "csv", num_shards=5, **THREADS)
    _same_output(local, on_beam)
    assert sorted(Path(p).stat().st_size == 0 for p in on_beam.paths) == [0, 0, 0, 1, 1]
    for name in ("x", "y"):
        save_image(tmp_path / "tree" / name / f"{name}.png", random_image(rng, 5, 5))
    local = convert_folders(tmp_path / "tree", tmp_path / "lf" / "f", num_shards=1, **QUIET)
    # The label map elsewhere: the shards' folder is made all the same.
    on_beam = convert_folders(
        tmp_path / "tree",
        tmp_path / "bf" / "deep" / "f",
        num_shards=1,
        label_map_output=tmp_path / "bf.pbtxt",
        **THREADS,
    )
    _same_output(local, on_beam)


def _files(folder):
    return {path.name: path.read_bytes() for path in folder.iterdir()}


@pytest.mark.slow
def test_on_error_raise_on_beam_names_a_broken_image_and_writes_nothing(broken_voc, tmp_path):
    voc_root, reasons = broken_voc
    # Workers build in parallel: the first broken image met stops the pipeline.
    with pytest.raises(ConversionError) as raised:
        convert_voc(voc_root, tmp_path / "o" / "voc", on_error="raise", **THREADS)
    assert str(raised.value) in reasons
    assert os.listdir(tmp_path / "o") == []
    # Over an earlier conversion, which stays as it was.
    convert_voc(voc_root, tmp_path / "o" / "voc", num_shards=2, **QUIET)
    earlier = _files(tmp_path / "o")
    assert len(earlier) == 3
    with pytest.raises(ConversionError):
        convert_voc(voc_root, tmp_path / "o" / "voc", on_error="raise", **THREADS)
    assert _files(tmp_path / "o") == earlier


def test_on_beam_every_image_failing_writes_nothing_and_a_success_replaces(broken_voc, tmp_path):
    voc_root, reasons = broken_voc
    for stem in ("000001", "000002", "000003"):
        (voc_root / "Annotations" / f"{stem}.xml").rename(tmp_path / f"{stem}.xml")
    with pytest.raises(ConversionError) as raised:
        convert_voc(voc_root, tmp_path / "beam" / "voc", **THREADS)
    assert str(raised.value) == (
        f"every image failed its check (3 of 3), so nothing was written: {'; '.join(reasons)}"
    )
    assert os.listdir(tmp_path / "beam") == []
    for stem in ("000001", "000002", "000003"):
        (tmp_path / f"{stem}.xml").rename(voc_root / "Annotations" / f"{stem}.xml")
    earlier = convert_voc(voc_root, tmp_path / "beam" / "voc", num_shards=3, **QUIET)
    local = convert_voc(voc_root, tmp_path / "local" / "voc", num_shards=2, **QUIET)
    on_beam = convert_voc(voc_root, tmp_path / "beam" / "voc", num_shards=2, **THREADS)
    assert on_beam.replaced == earlier.paths
    assert sorted(os.listdir(tmp_path / "beam")) == sorted(
        ["label_map.pbtxt", *(Path(p).name for p in on_beam.paths)]
    )
    _same_output(local, on_beam)


def test_cli_on_beam_prints_what_the_local_run_prints(broken_voc, tmp_path, capsys):
    from object_input import cli
    from object_input.cli.convert import LEFT_OUT_STATUS

    voc_root, _ = broken_voc
    argv = ["convert", "voc", str(voc_root), "--no-progress", "--num-shards", "2", "-o"]
    assert cli.main([*argv, str(tmp_path / "voc")]) == LEFT_OUT_STATUS
    local = capsys.readouterr()
    beam_flags = ["--runner", "DirectRunner", "--beam-options=--direct_num_workers=2"]
    assert cli.main([*argv, str(tmp_path / "voc"), *beam_flags]) == LEFT_OUT_STATUS
    assert capsys.readouterr() == local


def test_beam_options_need_a_runner_and_flags_given_win():
    from object_input.scale_out.beam_runs import pipeline_options

    with pytest.raises(ValueError, match="beam_options are for a Beam runner: give runner"):
        WriteOptions(beam_options="--direct_num_workers=2")
    assert WriteOptions(runner="DirectRunner", beam_options=["--a", "--b"]).beam_options == (
        "--a",
        "--b",
    )
    options = pipeline_options("DirectRunner", None, 3).get_all_options()
    assert (options["runner"], options["direct_num_workers"]) == ("DirectRunner", 3)
    assert options["direct_running_mode"] == "multi_threading"
    flags = "--direct_num_workers=5 --direct_running_mode=in_memory"
    for given in (flags, flags.split()):
        options = pipeline_options("DirectRunner", given, 3).get_all_options()
        assert (options["direct_num_workers"], options["direct_running_mode"]) == (5, "in_memory")
    options = pipeline_options("FlinkRunner", "--flink_master=host:8081").get_all_options()
    assert (options["runner"], options["flink_master"]) == ("FlinkRunner", "host:8081")
