"""``object-input convert``: what it prints, its flags (the WriteOptions fields), the CSV
separator hint, singular counts."""

import shlex

import numpy as np
import pytest

from object_input import cli
from object_input.cli import convert
from object_input.cli._common import program


def test_convert_prints_what_it_wrote_and_the_next_command(tmp_path, capsys):
    import tensorflow as tf

    images = tmp_path / "images"
    images.mkdir()
    for name in ("a.png", "b.png"):
        (images / name).write_bytes(tf.io.encode_png(np.zeros((10, 20, 3), np.uint8)).numpy())
    table = tmp_path / "boxes.csv"
    table.write_text(
        "filename,width,height,class,xmin,ymin,xmax,ymax\n"
        "a.png,20,10,cat,0,0,5,5\nb.png,20,10,dog,1,1,4,4\na.png,20,10,dog,2,2,8,8\n"
    )
    out = tmp_path / "out" / "train"
    argv = ["convert", "csv", str(table), str(images), "-o", str(out), "--num-shards", "2"]
    assert cli.main([*argv, "--no-progress"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == (
        f"wrote 2 examples with 3 boxes to 2 shards {out}-*.tfrecord; "
        f"label map {tmp_path / 'out' / 'label_map.pbtxt'} (2 classes)"
    )
    assert lines[-1] == f"next: {program()} inspect {shlex.quote(f'{out}-*.tfrecord')}"
    assert cli.main(shlex.split(lines[-1])[2:]) == 0
    capsys.readouterr()
    # Another shard count: the new shards replace the old ones under the prefix.
    assert cli.main([*argv, "--num-shards", "1", "--no-progress"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"wrote 2 examples with 3 boxes to 1 shard {out}-00000-of-00001.tfrecord; "
        f"label map {tmp_path / 'out' / 'label_map.pbtxt'} (2 classes); removed 2 shards of the "
        f"earlier dataset under {out}: {out}-00000-of-00002.tfrecord … "
        f"{out}-00001-of-00002.tfrecord"
    )
    assert cli.main(["inspect", f"{out}-*"]) == 0
    assert capsys.readouterr().out.startswith("1 file, 2 records, 0 corrupt")
    assert (
        cli.main(["convert", "csv", str(tmp_path / "none.csv"), str(images), "-o", str(out)]) == 1
    )
    assert "object-input convert csv: error: cannot read" in capsys.readouterr().err


def test_convert_takes_verbose_before_or_after_the_format():
    def verbose(*argv):
        return cli.build_parser().parse_args(argv).verbose

    assert verbose("convert", "folders", "root", "-o", "out") is False
    assert verbose("convert", "--verbose", "folders", "root", "-o", "out") is True
    assert verbose("convert", "folders", "root", "-o", "out", "-v") is True
    assert verbose("-v", "convert", "folders", "root", "-o", "out") is True


def test_convert_flags_are_the_write_options_fields(tmp_path, capsys):
    from object_input.converters import WriteOptions

    def parsed(*flags):
        args = cli.build_parser().parse_args(["convert", "folders", "root", "-o", "out", *flags])
        return convert._write_options(args)

    assert parsed() == WriteOptions()
    flags = ["--num-shards", "3", "--label-map", "lm.pbtxt", "--label-map-output", "o.pbtxt"]
    flags += ["--workers", "2", "--no-shuffle", "--seed", "7", "--gzip", "--no-progress"]
    flags += ["--on-error", "raise", "--runner", "DirectRunner", "--beam-options=--x=1 --y=2"]
    assert parsed(*flags) == WriteOptions(
        num_shards=3,
        label_map="lm.pbtxt",
        label_map_output="o.pbtxt",
        num_workers=2,
        shuffle=False,
        seed=7,
        compression="GZIP",
        progress=False,
        on_error="raise",
        runner="DirectRunner",
        beam_options="--x=1 --y=2",
    )
    argv = ["convert", "folders", str(tmp_path), "-o", str(tmp_path / "t"), "--num-shards", "0"]
    assert cli.main(argv) == 1
    assert capsys.readouterr().err == (
        "object-input convert folders: error: num_shards must be an integer >= 1 or None, got 0\n"
    )


def test_counts_of_one_are_singular(tmp_path, capsys):
    import tensorflow as tf

    from object_input.wording import count

    assert [count(1, "box"), count(0, "box"), count(2, "warm-up batch")] == [
        "1 box",
        "0 boxes",
        "2 warm-up batches",
    ]
    images = tmp_path / "images"
    images.mkdir()
    (images / "a.png").write_bytes(tf.io.encode_png(np.zeros((10, 20, 3), np.uint8)).numpy())
    table = tmp_path / "boxes.csv"
    table.write_text("filename,width,height,class,xmin,ymin,xmax,ymax\na.png,20,10,cat,0,0,5,5\n")
    out = tmp_path / "train"
    assert (
        cli.main(["convert", "csv", str(table), str(images), "-o", str(out), "--no-progress"]) == 0
    )
    assert capsys.readouterr().out.splitlines()[0] == (
        f"wrote 1 example with 1 box to 1 shard {out}-00000-of-00001.tfrecord; "
        f"label map {tmp_path / 'label_map.pbtxt'} (1 class)"
    )
    assert cli.main(["inspect", "--verify", f"{out}-*.tfrecord"]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [
        "1 of 1 file verified",
        f"  {out}-00000-of-00001.tfrecord: 1 good record, verified",
    ]


@pytest.mark.parametrize("separator, flag", [(";", ";"), ("\t", "\\t")])
def test_convert_csv_names_the_separator_the_header_uses(tmp_path, capsys, separator, flag):
    import tensorflow as tf

    images = tmp_path / "images"
    images.mkdir()
    (images / "a.png").write_bytes(tf.io.encode_png(np.zeros((10, 20, 3), np.uint8)).numpy())
    table = tmp_path / "boxes.csv"
    table.write_text(
        "filename,width,height,class,xmin,ymin,xmax,ymax\na.png,20,10,cat,0,0,5,5\n".replace(
            ",", separator
        )
    )
    argv = ["convert", "csv", str(table), str(images), "-o", str(tmp_path / "t"), "--no-progress"]
    assert cli.main(argv) == 1
    assert capsys.readouterr().err.endswith(
        f"(in any order); the header looks {separator!r}-separated: pass "
        f"field_delim={separator!r} (convert csv: --field-delim {separator!r})\n"
    )
    assert cli.main([*argv, "--field-delim", flag]) == 0
    assert capsys.readouterr().out.startswith("wrote 1 example with 1 box to 1 shard")


def test_convert_folders_says_how_a_classifier_reads_it(tmp_path, capsys):
    import tensorflow as tf

    (tmp_path / "flowers" / "rose").mkdir(parents=True)
    image = tf.io.encode_png(np.zeros((4, 4, 3), np.uint8)).numpy()
    (tmp_path / "flowers" / "rose" / "a.png").write_bytes(image)
    out = tmp_path / "train"
    argv = ["convert", "folders", str(tmp_path / "flowers"), "-o", str(out), "--no-progress"]
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        f"wrote 1 example with image-level classes to 1 shard {out}-00000-of-00001.tfrecord; "
        f"label map {tmp_path / 'label_map.pbtxt'} (1 class)"
    )
    assert lines[-1] == (
        f"  make_dataset({str(out) + '-00000-of-00001.tfrecord'!r}, keras='classification') "
        "gives (images, labels) for a Keras classifier"
    )
