"""Earth Engine exports: patches read in export order with exact values and georeference, the
predictions written back and read again, stitching, tables, sequence exports and bad input.

The exports here are written by hand from the documented layout (not by the library's writer):
a 2 × 3 grid of 3 × 4 patches (height × width) over a "world" whose every pixel value tells its
band and place, buffered for a (3, 5) kernel, spread over three files.
"""

import json
import os
import tempfile

import hypothesis.strategies as st
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings

from object_input import earthengine, fields, make_dataset
from object_input.earthengine import Mixer
from object_input.options import ReadOptions
from object_input.reliability.skips import stats
from object_input.sources import EarthEngine, EarthEngineTable

H, W = 3, 4
ROWS, COLS = 2, 3
KERNEL = (3, 5)
BH, BW = 1, 2  # ⌊kernel / 2⌋
AFFINE = [0.5, 0.0, 100.0, 0.0, -0.25, 50.0]
FILE_PATCHES = (2, 3, 1)  # patches per file: indices continue across files


def world(band: int, y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Pixel value of ``band`` at region pixel (y, x); the buffer reaches y = -1, x = -2."""
    return (band * 1000 + (y + BH) * 20 + (x + BW)).astype(np.float32)


def patch_pixels(band: int, index: int, bh: int = BH, bw: int = BW) -> np.ndarray:
    row, col = divmod(index, COLS)
    y, x = np.mgrid[row * H - bh : (row + 1) * H + bh, col * W - bw : (col + 1) * W + bw]
    return world(band, y, x)


def feature(kind: str, values) -> tf.train.Feature:
    values = np.asarray(values).ravel()
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values.astype(np.int64)))
    return tf.train.Feature(
        bytes_list=tf.train.BytesList(value=[values.astype(np.uint8).tobytes()])
    )


def example(features: dict) -> bytes:
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write_export(prefix, records, gzip=(True, False, True), mixer=True):
    """``records`` in files of FILE_PATCHES records (file 1 uncompressed); returns the paths."""
    paths, start = [], 0
    for number, (count, compressed) in enumerate(zip(FILE_PATCHES, gzip, strict=True)):
        path = f"{prefix}-{number:05d}.tfrecord" + (".gz" if compressed else "")
        with tf.io.TFRecordWriter(path, "GZIP" if compressed else None) as writer:
            for record in records[start : start + count]:
                writer.write(record)
        paths.append(path)
        start += count
    if mixer:
        mixer_json = {
            "projection": {"crs": "EPSG:32610", "affine": {"doubleMatrix": AFFINE}},
            "patchDimensions": [W, H],
            "patchesPerRow": COLS,
            "totalPatches": ROWS * COLS,
        }
        with open(f"{prefix}-mixer.json", "w") as f:
            json.dump(mixer_json, f)
    return paths


def float_export(tmp_path, name="export"):
    records = [
        example(
            {"B1": feature("float", patch_pixels(0, i)), "B2": feature("float", patch_pixels(1, i))}
        )
        for i in range(ROWS * COLS)
    ]
    return str(tmp_path / name), write_export(str(tmp_path / name), records)


def elements(source, **kwargs):
    return list(make_dataset(source, batch_size=None, **kwargs).as_numpy_iterator())


def expected_bounds(index: int) -> list[float]:
    row, col = divmod(index, COLS)
    return [
        100 + 0.5 * col * W,
        50 - 0.25 * (row + 1) * H,
        100 + 0.5 * (col + 1) * W,
        50 - 0.25 * row * H,
    ]


def test_patches_come_in_export_order_with_exact_values_and_georeference(tmp_path):
    prefix, paths = float_export(tmp_path)
    source = EarthEngine(prefix, bands=["B2", "B1"], patch_size=(H, W), kernel_size=KERNEL)
    assert source.codes == ["GZIP", "", "GZIP"]
    got = elements(source)
    assert [int(e[fields.PATCH_INDEX]) for e in got] == list(range(ROWS * COLS))
    owners = [p for p, n in zip(paths, FILE_PATCHES, strict=True) for _ in range(n)]
    for index, element in enumerate(got):
        image = element[fields.IMAGE]
        assert image.shape == (H + 2 * BH, W + 2 * BW, 2) and image.dtype == np.float32
        np.testing.assert_array_equal(image[..., 0], patch_pixels(1, index))
        np.testing.assert_array_equal(image[..., 1], patch_pixels(0, index))
        assert (element[fields.PATCH_ROW], element[fields.PATCH_COL]) == divmod(index, COLS)
        assert element[fields.PATCH_BOUNDS].tolist() == expected_bounds(index)
        assert element[fields.RECORD_ID].decode() == f"{owners[index]}:patch {index}"


def test_files_glob_and_unbuffered_patches(tmp_path):
    records = [example({"B1": feature("float", patch_pixels(0, i, 0, 0))}) for i in range(6)]
    write_export(str(tmp_path / "e"), records, mixer=False)
    source = EarthEngine(str(tmp_path / "e-*"), bands=["B1"], patch_size=(H, W))
    got = elements(source)
    assert source.mixer is None and fields.PATCH_ROW not in got[0]
    for index, element in enumerate(got):
        np.testing.assert_array_equal(element[fields.IMAGE][..., 0], patch_pixels(0, index, 0, 0))


@pytest.mark.slow
def test_shards_keep_global_patch_indices(tmp_path):
    prefix, _ = float_export(tmp_path)
    seen = []
    for shard in range(4):
        source = EarthEngine(prefix, bands=["B1"], patch_size=(H, W), kernel_size=KERNEL)
        got = elements(source, reading=ReadOptions(num_shards=4, shard_index=shard))
        for element in got:
            index = int(element[fields.PATCH_INDEX])
            np.testing.assert_array_equal(element[fields.IMAGE][..., 0], patch_pixels(0, index))
            assert element[fields.PATCH_BOUNDS].tolist() == expected_bounds(index)
        seen.append([int(e[fields.PATCH_INDEX]) for e in got])
    assert seen == [[0, 4], [1, 5], [2], [3]]


def test_int64_bytes_and_array_bands(tmp_path):
    def record(i):
        depth2 = np.stack([patch_pixels(2, i), patch_pixels(3, i)])  # [D, H', W'] (CHW)
        return example(
            {
                "count": feature("int64", patch_pixels(0, i)),
                "mask": feature("bytes", patch_pixels(1, i) % 256),
                "series": feature("float", depth2),
            }
        )

    write_export(str(tmp_path / "a"), [record(i) for i in range(6)])
    source = EarthEngine(
        str(tmp_path / "a"),
        bands=["count", "series", "mask"],
        patch_size=(H, W),
        kernel_size=KERNEL,
        tensor_depths={"series": 2},
    )
    for index, element in enumerate(elements(source)):
        image = element[fields.IMAGE]
        assert image.shape == (H + 2 * BH, W + 2 * BW, 4)
        np.testing.assert_array_equal(image[..., 0], patch_pixels(0, index))
        np.testing.assert_array_equal(image[..., 1], patch_pixels(2, index))
        np.testing.assert_array_equal(image[..., 2], patch_pixels(3, index))
        np.testing.assert_array_equal(image[..., 3], patch_pixels(1, index) % 256)


def test_collapsed_bands_are_one_chw_feature_named_after_the_first(tmp_path):
    records = [
        example({"B1": feature("float", np.stack([patch_pixels(b, i) for b in range(3)]))})
        for i in range(6)
    ]
    write_export(str(tmp_path / "c"), records)
    source = EarthEngine(
        str(tmp_path / "c"),
        bands=["B1", "B2", "B3"],
        patch_size=(H, W),
        kernel_size=KERNEL,
        collapse_bands=True,
    )
    for index, element in enumerate(elements(source)):
        for band in range(3):
            np.testing.assert_array_equal(
                element[fields.IMAGE][..., band], patch_pixels(band, index)
            )


def sequence_records():
    """One SequenceExample per pixel: scalar B1 in the context, array band T (depth 2) as a
    feature list; pixels row-major within each buffered patch, patches row-major."""
    records = []
    for index in range(6):
        b1, t0, t1 = (patch_pixels(b, index) for b in (0, 1, 2))
        for y in range(H + 2 * BH):
            for x in range(W + 2 * BW):
                pixel = tf.train.SequenceExample()
                pixel.context.feature["B1"].float_list.value.append(b1[y, x])
                steps = pixel.feature_lists.feature_list["T"]
                for value in (t0[y, x], t1[y, x]):
                    steps.feature.add().int64_list.value.append(int(value))
                records.append(pixel.SerializeToString())
    return records


def test_sequence_exports_are_put_back_together_into_patches(tmp_path):
    records = sequence_records()
    pixels = (H + 2 * BH) * (W + 2 * BW)
    # Files split inside patches: pixels, like patches, continue across files.
    path = str(tmp_path / "s")
    for number, (start, stop) in enumerate(
        [(0, pixels + 7), (pixels + 7, 4 * pixels), (4 * pixels, None)]
    ):
        with tf.io.TFRecordWriter(f"{path}-{number:05d}.tfrecord.gz", "GZIP") as writer:
            for record in records[start:stop]:
                writer.write(record)
    source = EarthEngine(
        path,
        bands=["T", "B1"],
        patch_size=(H, W),
        kernel_size=KERNEL,
        tensor_depths={"T": 2},
        sequence_data=True,
    )
    got = elements(source)
    assert [int(e[fields.PATCH_INDEX]) for e in got] == list(range(6))
    for index, element in enumerate(got):
        image = element[fields.IMAGE]
        np.testing.assert_array_equal(image[..., 0], patch_pixels(1, index))
        np.testing.assert_array_equal(image[..., 1], patch_pixels(2, index))
        np.testing.assert_array_equal(image[..., 2], patch_pixels(0, index))


def test_a_sequence_export_ending_inside_a_patch_is_an_error(tmp_path):
    path = str(tmp_path / "s-00000.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in sequence_records()[:-3]:
            writer.write(record)
    source = EarthEngine(
        path,
        bands=["B1", "T"],
        patch_size=(H, W),
        kernel_size=KERNEL,
        tensor_depths={"T": 2},
        sequence_data=True,
    )
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"s-00000.tfrecord:patch 5: the export ends inside this patch: it has 37 pixel "
        r"records, expected 40",
    ):
        elements(source)


def test_a_band_of_the_wrong_length_names_file_patch_and_band(tmp_path):
    records = [
        example({"B1": feature("float", patch_pixels(0, i)[: (1 if i == 3 else None)])})
        for i in range(6)
    ]
    paths = write_export(str(tmp_path / "bad"), records)
    source = EarthEngine(str(tmp_path / "bad"), bands=["B1"], patch_size=(H, W), kernel_size=KERNEL)
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        # (TensorFlow escapes the quotes of assertion messages.)
        match=rf"record {paths[1]}:patch 3: band .'B1.' has 8 values, expected 40 "
        r"\(5×8 with the kernel buffer\)",
    ):
        elements(source)


def test_more_patches_than_the_mixer_says_is_an_error(tmp_path):
    prefix, _ = float_export(tmp_path)
    small = Mixer("EPSG:4326", tuple(AFFINE), (H, W), COLS, 3)
    source = EarthEngine(prefix, bands=["B1"], patch_size=(H, W), kernel_size=KERNEL, mixer=small)
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match="patch 3: the export has more patches than the mixer totalPatches 3",
    ):
        elements(source)


def test_bad_exports_and_arguments_are_clear_errors(tmp_path):
    prefix, paths = float_export(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no Earth Engine export files .*nothing-00000"):
        EarthEngine(str(tmp_path / "nothing"), bands=["B1"], patch_size=(H, W))
    with pytest.raises(ValueError, match=r"first record has no band 'B9'; it has \['B1', 'B2'\]"):
        EarthEngine(prefix, bands=["B9"], patch_size=(H, W))
    with pytest.raises(ValueError, match=r"patch_size \(4, 3\) .* patchDimensions \[4, 3\]"):
        EarthEngine(prefix, bands=["B1"], patch_size=(W, H))
    with pytest.raises(
        ValueError,
        match=r"export-00000.tfrecord.gz: band 'B1' of the first patch has 40 values, not "
        r"1×3×4 = 12 for patch_size \(3, 4\) and kernel_size \(1, 1\)",
    ):
        EarthEngine(prefix, bands=["B1"], patch_size=(H, W))
    with pytest.raises(ValueError, match="tensor_depths names 'B3'"):
        EarthEngine(prefix, bands=["B1"], patch_size=(H, W), tensor_depths={"B3": 2})
    tf.io.gfile.remove(paths[1])
    with pytest.raises(FileNotFoundError, match=r"export-00001.tfrecord\[.gz\] is missing"):
        EarthEngine(prefix, bands=["B1"], patch_size=(H, W))


def test_the_mixer_places_every_patch(tmp_path):
    prefix, _ = float_export(tmp_path)
    mixer = Mixer.load(f"{prefix}-mixer.json")
    assert mixer.crs == "EPSG:32610" and mixer.patch_size == (H, W)
    assert (mixer.rows, mixer.patches_per_row, mixer.total_patches) == (ROWS, COLS, 6)
    assert [mixer.row_col(i) for i in range(6)] == [divmod(i, COLS) for i in range(6)]
    assert [list(mixer.bounds(i)) for i in range(6)] == [expected_bounds(i) for i in range(6)]
    with pytest.raises(IndexError):
        mixer.row_col(6)
    rotated = Mixer("EPSG:3857", (0.0, 1.0, 10.0, 2.0, 0.0, 20.0), (H, W), COLS, 6)
    # x = row + 10, y = 2·col + 20: patch 4 (row 1, col 1) spans rows 3..6, cols 4..8.
    assert rotated.bounds(4) == (13.0, 28.0, 16.0, 36.0)
    assert Mixer.from_json(mixer.to_json()) == mixer
    bad = tmp_path / "bad-mixer.json"
    bad.write_text(json.dumps({**mixer.to_json(), "totalPatches": 7}))
    with pytest.raises(
        ValueError, match=r"bad-mixer.json: not an Earth Engine mixer: .*totalPatches 7"
    ):
        Mixer.load(bad)
    bad.write_text(json.dumps({**mixer.to_json(), "projection": {"crs": "EPSG:4326"}}))
    with pytest.raises(ValueError, match="missing 'affine'"):
        Mixer.load(bad)


def predictions_of(source):
    """A stand-in model: two output bands computed from each buffered patch."""
    return [
        np.stack([e[fields.IMAGE][..., 0] * 2, e[fields.IMAGE][..., 1] - 1], axis=-1)
        for e in elements(source)
    ]


@pytest.mark.parametrize(
    "out_name", ["pred.tfrecord", pytest.param("pred.tfrecord.gz", marks=pytest.mark.slow)]
)
def test_predictions_written_back_read_again_equal_the_cropped_patches(tmp_path, out_name):
    prefix, _ = float_export(tmp_path)
    source = EarthEngine(prefix, bands=["B1", "B2"], patch_size=(H, W), kernel_size=KERNEL)
    predictions = predictions_of(source)
    out = str(tmp_path / out_name)
    batched = tf.data.Dataset.from_tensor_slices(np.stack(predictions)).batch(4)
    count = earthengine.write_predictions(
        batched, out, f"{prefix}-mixer.json", band_names=["twice", "less"], kernel_size=KERNEL
    )
    assert count == 6
    records = list(tf.data.TFRecordDataset(out, "GZIP" if out.endswith(".gz") else ""))
    assert len(records) == 6
    for index, record in enumerate(records):
        feature = tf.train.Example.FromString(record.numpy()).features.feature
        assert sorted(feature) == ["less", "twice"]
        inner = predictions[index][BH : BH + H, BW : BW + W]
        assert feature["twice"].float_list.value == list(inner[..., 0].ravel())
        assert feature["less"].float_list.value == list(inner[..., 1].ravel())
    again = EarthEngine(
        out, bands=["twice", "less"], patch_size=(H, W), mixer=f"{prefix}-mixer.json"
    )
    for index, element in enumerate(elements(again)):
        np.testing.assert_array_equal(element[fields.IMAGE], predictions[index][BH:-BH, BW:-BW])


def test_a_wrong_prediction_count_or_shape_writes_nothing(tmp_path):
    prefix, _ = float_export(tmp_path)
    source = EarthEngine(prefix, bands=["B1", "B2"], patch_size=(H, W), kernel_size=KERNEL)
    predictions = predictions_of(source)
    out = tmp_path / "pred.tfrecord"
    mixer = Mixer.load(f"{prefix}-mixer.json")
    write = earthengine.write_predictions
    with pytest.raises(
        ValueError, match=r"5 predictions for an export of 6 patches; nothing was written"
    ):
        write(iter(predictions[:5]), out, mixer, band_names=["a", "b"], kernel_size=KERNEL)
    with pytest.raises(ValueError, match="more predictions than the mixer's 6 patches"):
        write(predictions * 2, out, mixer, band_names=["a", "b"], kernel_size=KERNEL)
    with pytest.raises(
        ValueError, match=r"prediction 0 has shape \(5, 8, 2\); expected \(5, 8, 3\)"
    ):
        write(predictions, out, mixer, band_names=["a", "b", "c"], kernel_size=KERNEL)
    with pytest.raises(
        ValueError, match=r"prediction 0 has shape \(5, 8, 2\); expected \(3, 4, 2\)"
    ):
        write(predictions, out, mixer, band_names=["a", "b"])
    assert list(tmp_path.glob("pred*")) == []
    # Unbuffered predictions (a model that cropped the buffer itself) are written as they are.
    inner = [p[BH:-BH, BW:-BW] for p in predictions]
    write(np.stack(inner), out, mixer, band_names=["a", "b"], kernel_size=KERNEL)
    assert list(tmp_path.glob("pred*")) == [out]


def test_stitch_assembles_the_region_with_the_mixer_affine(tmp_path):
    prefix, _ = float_export(tmp_path)
    source = EarthEngine(prefix, bands=["B1", "B2"], patch_size=(H, W), kernel_size=KERNEL)
    patches = [e[fields.IMAGE] for e in elements(source)]
    image, affine = earthengine.stitch(patches, f"{prefix}-mixer.json")
    y, x = np.mgrid[0 : ROWS * H, 0 : COLS * W]
    np.testing.assert_array_equal(image, np.stack([world(0, y, x), world(1, y, x)], axis=-1))
    assert affine == tuple(AFFINE)
    with pytest.raises(ValueError, match=r"5 patches for an export of 6; missing patch 5$"):
        earthengine.stitch(patches[:5], f"{prefix}-mixer.json")
    with pytest.raises(ValueError, match="patch 6 is beyond the mixer's 6 patches"):
        earthengine.stitch(patches + patches[:1], f"{prefix}-mixer.json")
    with pytest.raises(ValueError, match=r"patch 0 has shape \(5, 7, 2\)"):
        earthengine.stitch([p[:, :-1] for p in patches], f"{prefix}-mixer.json")


def test_write_export_follows_the_layout(tmp_path):
    region = np.stack(np.mgrid[0:7, 0:13], axis=-1).astype(np.float32) + 1  # 2 × 3 patches fit
    paths = earthengine.write_export(
        region,
        tmp_path / "w",
        band_names=["y", "x"],
        patch_size=(H, W),
        kernel_size=KERNEL,
        patches_per_file=4,
        affine=AFFINE,
    )
    assert [p.rsplit("/", 1)[1] for p in paths] == ["w-00000.tfrecord.gz", "w-00001.tfrecord.gz"]
    mixer = Mixer.load(tmp_path / "w-mixer.json")
    assert (mixer.patch_size, mixer.patches_per_row, mixer.total_patches) == ((H, W), COLS, 6)
    records = [r.numpy() for p in paths for r in tf.data.TFRecordDataset(p, "GZIP")]
    assert len(records) == 6
    padded = np.pad(region, ((BH, BH), (BW, BW), (0, 0)))
    for index, record in enumerate(records):
        row, col = divmod(index, COLS)
        feature = tf.train.Example.FromString(record).features.feature
        window = padded[row * H : row * H + H + 2 * BH, col * W : col * W + W + 2 * BW]
        assert feature["y"].float_list.value == list(window[..., 0].ravel())
        assert feature["x"].float_list.value == list(window[..., 1].ravel())


def table_export(path, rows, compressed=True):
    with tf.io.TFRecordWriter(path, "GZIP" if compressed else None) as writer:
        for row in rows:
            writer.write(example(row))


def test_table_export_properties(tmp_path):
    path = str(tmp_path / "table.tfrecord.gz")
    rows = [
        {
            "B2": feature("float", [0.5 * i]),
            "landcover": feature("int64", [i + 1]),
            "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"site{i}".encode()])),
            "hist": feature("float", np.arange(6) + i),
        }
        for i in range(5)
    ]
    table_export(path, rows)
    source = EarthEngineTable(path, {"B2": (), "landcover": (), "name": (), "hist": (2, 3)})
    got = elements(source, shuffle=False)
    assert len(got) == 5
    for i, element in enumerate(got):
        assert element["B2"] == np.float32(0.5 * i) and element["B2"].shape == ()
        assert element["landcover"] == i + 1 and element["landcover"].dtype == np.int64
        assert element["name"] == f"site{i}".encode()
        np.testing.assert_array_equal(element["hist"], (np.arange(6) + i).reshape(2, 3))
        assert element[fields.RECORD_ID].decode() == f"{path}:{i}"
    assert sorted(e["landcover"] for e in elements(source, shuffle=True, seed=1)) == [1, 2, 3, 4, 5]


def test_table_property_errors_name_file_record_and_property(tmp_path):
    path = str(tmp_path / "table.tfrecord")
    table_export(
        path,
        [{"B2": feature("float", [1.0])}, {"B2": feature("float", [1.0, 2.0])}],
        compressed=False,
    )
    with pytest.raises(
        ValueError, match=r"table.tfrecord: the first record has no property 'B3'; it has \['B2'\]"
    ):
        EarthEngineTable(path, ["B3"])
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=rf"record {path}:1: property .'B2.' has 2 values, expected 1",
    ):
        elements(EarthEngineTable(path, ["B2"]), shuffle=False)


@pytest.mark.slow
@settings(max_examples=4)
@given(
    st.integers(1, 3),
    st.integers(1, 3),
    st.tuples(st.integers(1, 4), st.integers(1, 4)),
    st.tuples(st.integers(1, 4), st.integers(1, 6)),
    st.tuples(st.integers(0, 3), st.integers(0, 3)),
    st.integers(1, 4),
    st.integers(1, 2),
)
def test_export_read_stitch_and_write_back_round_trip(
    rows, cols, patch, kernel, leftover, per_file, num_shards
):
    """Any grid, kernel and file split: every buffered patch is its window of the padded scene,
    the shards together hold every patch once, stitching gives the scene back and predictions
    written back hold the unbuffered patches."""
    (ph, pw), (bh, bw) = patch, (kernel[0] // 2, kernel[1] // 2)
    # Partial patches at the bottom and right edges are dropped.
    height, width = rows * ph + leftover[0] % ph, cols * pw + leftover[1] % pw
    scene = np.arange(height * width * 2, dtype=np.float32).reshape(height, width, 2) + 1
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "p")
        earthengine.write_export(
            scene,
            prefix,
            band_names=["a", "b"],
            patch_size=patch,
            kernel_size=kernel,
            patches_per_file=per_file,
            affine=(2.0, 0.0, -10.0, 0.0, -3.0, 7.0),
        )
        got = []
        for shard in range(num_shards):
            source = EarthEngine(prefix, bands=["a", "b"], patch_size=patch, kernel_size=kernel)
            got += elements(source, reading=ReadOptions(num_shards=num_shards, shard_index=shard))
        got.sort(key=lambda e: e[fields.PATCH_INDEX])
        assert [int(e[fields.PATCH_INDEX]) for e in got] == list(range(rows * cols))
        padded = np.pad(scene, ((bh, bh), (bw, bw), (0, 0)))
        for index, element in enumerate(got):
            row, col = divmod(index, cols)
            window = padded[row * ph : (row + 1) * ph + 2 * bh, col * pw : (col + 1) * pw + 2 * bw]
            np.testing.assert_array_equal(element[fields.IMAGE], window)
            assert element[fields.PATCH_BOUNDS].tolist() == [
                -10 + 2 * col * pw,
                7 - 3 * (row + 1) * ph,
                -10 + 2 * (col + 1) * pw,
                7 - 3 * row * ph,
            ]
        images = [e[fields.IMAGE] for e in got]
        stitched, _ = earthengine.stitch(images, f"{prefix}-mixer.json")
        np.testing.assert_array_equal(stitched, scene[: rows * ph, : cols * pw])
        out = os.path.join(tmp, "out.tfrecord")
        earthengine.write_predictions(
            images, out, f"{prefix}-mixer.json", band_names=["a", "b"], kernel_size=kernel
        )
        written = [
            tf.train.Example.FromString(r.numpy()).features.feature
            for r in tf.data.TFRecordDataset(out)
        ]
        back = [
            np.stack([np.reshape(f[band].float_list.value, patch) for band in "ab"], axis=-1)
            for f in written
        ]
        again, _ = earthengine.stitch(back, f"{prefix}-mixer.json")
        np.testing.assert_array_equal(again, stitched)


def test_stitch_places_feature_dicts_by_patch_index_in_any_order(tmp_path):
    prefix, _ = float_export(tmp_path)
    source = EarthEngine(prefix, bands=["B1", "B2"], patch_size=(H, W), kernel_size=KERNEL)
    shuffled = list(make_dataset(source, batch_size=4, shuffle=True, seed=1).as_numpy_iterator())
    order = [int(i) for batch in shuffled for i in batch[fields.PATCH_INDEX]]
    assert sorted(order) == list(range(6)) and order[0] != 0  # shuffled, patch 0 not first
    image, _ = earthengine.stitch(shuffled, source.mixer)
    y, x = np.mgrid[0 : ROWS * H, 0 : COLS * W]
    np.testing.assert_array_equal(image, np.stack([world(0, y, x), world(1, y, x)], axis=-1))
    one_shard = make_dataset(source, batch_size=None, reading=ReadOptions(num_shards=2))
    with pytest.raises(
        ValueError, match="3 patches for an export of 6; missing patch 1 and 2 more"
    ):
        earthengine.stitch(one_shard, source.mixer)
    twice = list(one_shard.as_numpy_iterator()) * 2
    with pytest.raises(ValueError, match="patch 0 comes twice"):
        earthengine.stitch(twice, source.mixer)
    with pytest.raises(
        ValueError, match=f"prediction 0 is for patch {order[0]}: predictions must come in"
    ):
        earthengine.write_predictions(
            shuffled,
            tmp_path / "p.tfrecord",
            source.mixer,
            band_names=["a", "b"],
            kernel_size=KERNEL,
        )


def test_on_error_skip_drops_a_bad_patch_and_keeps_the_others_indices(tmp_path):
    records = [
        example({"B1": feature("float", patch_pixels(0, i)[: (1 if i == 3 else None)])})
        for i in range(6)
    ]
    write_export(str(tmp_path / "bad"), records)
    source = EarthEngine(str(tmp_path / "bad"), bands=["B1"], patch_size=(H, W), kernel_size=KERNEL)
    dataset = make_dataset(source, batch_size=None, on_error="skip")
    got = list(dataset.as_numpy_iterator())
    assert [int(e[fields.PATCH_INDEX]) for e in got] == [0, 1, 2, 4, 5]
    for element in got:
        index = int(element[fields.PATCH_INDEX])
        np.testing.assert_array_equal(element[fields.IMAGE][..., 0], patch_pixels(0, index))
    summary = stats(dataset)
    assert summary.skipped == {"band_length": 1} and summary.passed == 5


def test_a_damaged_file_stops_an_image_export_even_under_skip(tmp_path):
    prefix, paths = float_export(tmp_path)
    damaged = tmp_path / paths[1].rsplit("/", 1)[1]
    damaged.write_bytes(damaged.read_bytes()[:-30])  # file 1 is uncompressed: its last record cut
    source = EarthEngine(prefix, bands=["B1"], patch_size=(H, W), kernel_size=KERNEL)
    message = rf"file {paths[1]}: cannot read record 2"
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        elements(source, on_error="skip")


def test_table_rows_of_the_wrong_length_are_skipped_under_skip(tmp_path):
    path = str(tmp_path / "table.tfrecord.gz")
    table_export(path, [{"B2": feature("float", [i] * (2 if i == 1 else 1))} for i in range(4)])
    dataset = make_dataset(
        EarthEngineTable(path, ["B2"]), batch_size=None, shuffle=False, on_error="skip"
    )
    assert [float(e["B2"]) for e in dataset.as_numpy_iterator()] == [0.0, 2.0, 3.0]
    assert stats(dataset).skipped == {"band_length": 1}


def test_a_damaged_table_file_raises_naming_it_or_is_counted_with_the_rows_before_kept(tmp_path):
    path = tmp_path / "table.tfrecord"
    table_export(str(path), [{"B2": feature("float", [i])} for i in range(4)], compressed=False)
    path.write_bytes(path.read_bytes()[:-30])  # the last row cut
    source = EarthEngineTable(str(path), ["B2"])
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"file {path}: cannot read record 3"):
        list(make_dataset(source, batch_size=None, shuffle=False))
    dataset = make_dataset(source, batch_size=None, shuffle=False, on_error="skip")
    assert [float(e["B2"]) for e in dataset.as_numpy_iterator()] == [0.0, 1.0, 2.0]
    summary = stats(dataset)
    assert summary.passed == 3 and summary.skipped == {"unreadable_file": 1}
    assert summary.offenders[0].startswith(f"{path}:3: unreadable_file")
