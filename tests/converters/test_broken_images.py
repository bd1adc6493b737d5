"""Broken images: left out of a conversion and named with their reason, or stopping it under
on_error="raise"; odd but valid JPEGs still convert."""

import json

import numpy as np
import pytest
import tensorflow as tf
from converter_files import (
    QUIET,
    image_pixels,
    random_image,
    read_records,
    save_image,
)

from object_input import fields
from object_input.converters import (
    ConversionError,
    convert_coco,
    convert_folders,
    convert_voc,
)


def test_broken_images_are_left_out_and_named_with_their_reason(broken_voc, tmp_path):
    voc, reasons = broken_voc
    result = convert_voc(voc, tmp_path / "out" / "voc", num_shards=2, **QUIET)
    assert result.left_out == reasons
    assert (result.num_examples, result.num_boxes) == (3, 3)
    assert sorted(read_records(result.paths)) == ["000001", "000002", "000003"]
    assert result.summary().endswith(
        f"; left out 3 images that failed their check (first: {reasons[0]})"
    )
    for stem in ("000004", "000005"):
        (voc / "Annotations" / f"{stem}.xml").unlink()
    result = convert_voc(voc, tmp_path / "out1" / "voc", **QUIET)
    assert result.left_out == reasons[:1]
    assert result.summary().endswith(
        f"; left out 1 image that failed its check (first: {reasons[0]})"
    )


def test_on_error_raise_stops_at_the_first_broken_image(broken_voc, tmp_path):
    voc, _ = broken_voc
    with pytest.raises(ConversionError, match=r"000004\.jpg: truncated JPEG: the data ends"):
        convert_voc(voc, tmp_path / "out" / "voc", on_error="raise", shuffle=False, **QUIET)


def test_cli_exit_status_says_images_were_left_out(broken_voc, tmp_path, capsys):
    from object_input import cli
    from object_input.cli.convert import LEFT_OUT_STATUS

    voc, reasons = broken_voc
    argv = ["convert", "voc", str(voc), "--no-progress", "--num-shards", "1", "-o"]
    assert cli.main([*argv, str(tmp_path / "a" / "voc")]) == LEFT_OUT_STATUS == 3
    out, err = capsys.readouterr()
    assert out.startswith("wrote 3 examples with 3 boxes to 1 shard ")
    assert [line for line in out.splitlines() if line.startswith("  left out: ")] == [
        f"  left out: {reason}" for reason in reasons
    ]
    assert err == (
        "object-input convert voc: 3 images failed their check and were left out (listed "
        "above); exit status 3 (--on-error skip accepts that, --on-error raise stops at the "
        "first)\n"
    )
    assert cli.main([*argv, str(tmp_path / "b" / "voc"), "--on-error", "skip"]) == 0
    assert "left out 3 images" in capsys.readouterr().out
    assert cli.main([*argv, str(tmp_path / "c" / "voc"), "--on-error", "raise"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("object-input convert voc: error: ") and err.count("\n") == 1
    assert any(reason in err for reason in reasons)
    for stem in ("000004", "000005"):
        (voc / "Annotations" / f"{stem}.xml").unlink()
    assert cli.main([*argv, str(tmp_path / "d" / "voc")]) == 3
    out, err = capsys.readouterr()
    assert out.splitlines()[0].endswith(
        f"; left out 1 image that failed its check (first: {reasons[0]})"
    )
    assert err == (
        "object-input convert voc: 1 image failed its check and was left out (listed above); "
        "exit status 3 (--on-error skip accepts that, --on-error raise stops at the first)\n"
    )


def test_coco_size_mismatch_and_truncated_image_are_left_out(coco, tmp_path):
    path, images_dir, data = coco
    jpeg = images_dir / "sub" / "b.jpg"
    jpeg.write_bytes(jpeg.read_bytes()[:300])
    data["images"][2]["width"] = 13
    path.write_text(json.dumps(data))
    result = convert_coco(path, images_dir, tmp_path / "out" / "train", **QUIET)
    assert result.left_out == [
        f"{jpeg}: truncated JPEG: the data ends before its end-of-image marker",
        f"image id 3: image size 13x12 (width x height) in the annotation, but "
        f"'{images_dir / 'c.png'}' is 12x12",
    ]
    assert (result.num_examples, result.num_boxes) == (1, 3)
    assert sorted(read_records(result.paths)) == ["1"]
    with pytest.raises(ConversionError, match=r"b\.jpg: truncated JPEG"):
        convert_coco(
            path, images_dir, tmp_path / "o2" / "t", on_error="raise", shuffle=False, **QUIET
        )


def test_gray_and_cmyk_jpegs_still_convert(tmp_path, rng):
    image = pytest.importorskip("PIL.Image")
    import io

    root = tmp_path / "root"
    save_image(root / "gray" / "g.jpg", random_image(rng, 9, 7)[..., :1])
    cmyk = io.BytesIO()
    image.fromarray(random_image(rng, 6, 5)).convert("CMYK").save(cmyk, "JPEG")
    (root / "cmyk").mkdir()
    (root / "cmyk" / "c.jpg").write_bytes(cmyk.getvalue())
    result = convert_folders(root, tmp_path / "out" / "t", **QUIET)
    assert (result.num_examples, result.left_out) == (2, [])
    records = read_records(result.paths)
    for name in ("gray/g.jpg", "cmyk/c.jpg"):
        np.testing.assert_array_equal(records[name][0][fields.IMAGE], image_pixels(root / name))


def _jpeg_with_thumbnail(rng):
    """A JPEG whose APP1 segment holds a whole other JPEG (as an EXIF thumbnail does)."""
    thumbnail = tf.io.encode_jpeg(random_image(rng, 4, 4)).numpy()
    main = tf.io.encode_jpeg(random_image(rng, 20, 30)).numpy()
    payload = b"Exif\0\0" + thumbnail
    return main[:2] + b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload + main[2:]


def test_every_cut_of_a_jpeg_is_found_short(rng):
    from object_input.decoders.image_files import decode_image_file, jpeg_cut_short

    pixels = random_image(rng, 37, 53)
    jpegs = [
        tf.io.encode_jpeg(pixels).numpy(),
        tf.io.encode_jpeg(pixels, progressive=True).numpy(),
        tf.io.encode_jpeg(pixels[..., :1]).numpy(),
        _jpeg_with_thumbnail(rng),
    ]
    for jpeg in jpegs:
        assert jpeg.endswith(b"\xff\xd9")
        assert not jpeg_cut_short(jpeg)
        assert not jpeg_cut_short(jpeg + b"\0" * 9 + b"trailing bytes")
        assert all(jpeg_cut_short(jpeg[:n]) for n in range(3, len(jpeg)))
        decode_image_file(jpeg + b"\0" * 9)
