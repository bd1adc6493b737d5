"""Fuzzing every source's decoder (the Example decoder and TFRecord: test_fuzz.py).

Random bytes and mutated valid records go through each source's ``decode`` and, a few examples
each, through ``make_dataset`` under both ``on_error`` policies. Allowed outcomes: the record
decodes to the values a reference computes; a flag (``fields.ERROR``) whose message names the
record; under ``make_dataset``, an error naming the record (``raise``) or the record alone
skipped and counted under its reason (``skip``); or, for bytes that TensorFlow's own parsers and
codecs reject, their documented error (docs/reliability.md). Never a crash, a hang (a guard
ends the run with tracebacks) or silent wrong output.
"""

import csv
import faulthandler
import io

import caffe_db
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from source_samples import SAMPLED, record_ids, sample

import object_input as oi
from object_input import fields
from object_input.reliability import errors
from object_input.sources import CIFAR10, CSV, caffe_lmdb
from object_input.sources import _caffe_proto as caffe_proto
from object_input.sources import _samples as samples
from object_input.writers import encode_image

# Seconds a test may run before the hang guard dumps every thread and exits.
HANG_GUARD_S = 300
FUZZ = settings(
    max_examples=15,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# make_dataset builds a pipeline per example: a few each.
PIPELINE = settings(FUZZ, max_examples=3)
# TensorFlow's own parse and codec errors, which cannot name the record (docs/reliability.md).
TF_OWN = (
    "Could not parse example",
    "Unsupported datatype",
    "Invalid JPEG",
    "Invalid PNG",
    "Invalid BMP",
    "Incomplete bmp content",
    "Invalid GIF",
    "JPEG",
    "PNG",
    "Unknown image file format",
    "Data types don't match",
    "Could not parse",
    "Invalid protocol message input",
    "Error in sequence feature",
)


@pytest.fixture(autouse=True)
def hang_guard():
    faulthandler.dump_traceback_later(HANG_GUARD_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int) -> bytes:
    out = bytearray(data)
    for position, value in edits:
        if out:
            out[position % len(out)] = value
    return bytes(out[: max(0, len(out) - cut)])


def mutations(valid: bytes, max_cut: int = 20):
    """``valid`` with a few bytes overwritten and its end cut off."""
    return st.builds(
        _mutate,
        st.just(valid),
        st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
        st.integers(0, max_cut),
    )


def flagged_or_decoded(decode, record_id: str, *args) -> dict | None:
    """``decode(*args)``: the features when they decode (None: TensorFlow's own error); a flag
    must name ``record_id`` and a known reason."""
    try:
        out = decode(*args)
    except UnicodeDecodeError:
        return None  # TensorFlow's message quotes non-UTF-8 bytes (docs/reliability.md)
    except tf.errors.InvalidArgumentError as err:
        assert any(text in str(err) for text in TF_OWN), str(err)
        return None
    code = int(out.get(fields.ERROR, errors.OK))
    if code != errors.OK:
        assert errors.reason_of(code) in errors.REASONS
        # UTF-8, or a raised message would reach Python as a UnicodeDecodeError.
        assert record_id in out[fields.ERROR_DETAIL].numpy().decode()
    return out


def is_ok(out: dict | None) -> bool:
    return out is not None and int(out.get(fields.ERROR, errors.OK)) == errors.OK


def through_pipeline(
    source, record_id: str | tuple[str, ...], on_error: str, **options
) -> list[dict] | None:
    """Every example of ``source`` through ``make_dataset``; None when ``raise`` stopped on the
    bad record (its error must name it, or one of ``record_id`` when a tuple). Under ``skip``, a
    skip is counted under a reason and its offender line names the record."""
    named = (record_id,) if isinstance(record_id, str) else record_id
    dataset = oi.make_dataset(source, batch_size=None, shuffle=False, on_error=on_error, **options)
    try:
        examples = list(dataset)
    except tf.errors.InvalidArgumentError as err:
        assert on_error == "raise", str(err)
        message = str(err)
        assert any(i in message for i in named) or any(t in message for t in TF_OWN), message
        return None
    summary = oi.stats(dataset)
    assert summary.passed == len(examples)
    if summary.skipped:
        assert on_error == "skip" and summary.total_skipped == 1, summary
        assert summary.offenders[0].startswith(named), summary.offenders
    return examples


# --- Every source, by its declared sample ----------------------------------------------

CLEAN: dict[str, list[dict]] = {}


def clean_examples(name: str, folder) -> list[dict]:
    """The examples of ``name``'s clean sample (computed once)."""
    if name not in CLEAN:
        source = sample(name, folder)
        CLEAN[name] = list(oi.make_dataset(source, batch_size=None, shuffle=False))
    return CLEAN[name]


def assert_same_values(example: dict, expected: dict) -> None:
    # Record ids name the sample's folder, which differs.
    assert set(example) == set(expected)
    for key in set(expected) - {fields.RECORD_ID}:
        np.testing.assert_array_equal(example[key], expected[key], err_msg=key)


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLED)
@PIPELINE
@given(seed=st.integers(1, 2**31), on_error=st.sampled_from(["raise", "skip"]))
def test_every_source_with_a_randomly_damaged_record_through_make_dataset(
    tmp_path_factory, name, seed, on_error
):
    # The damaged record fails naming itself, is skipped alone, or decodes; its neighbours
    # decode to the clean sample's values either way. (Each source's exact decoding of fuzzed
    # bytes is checked against a reference below.)
    clean = clean_examples(name, tmp_path_factory.mktemp("clean"))
    source = sample(name, tmp_path_factory.mktemp("damaged"), seed)
    if source is None:
        return  # refused whole when made, naming the file
    examples = through_pipeline(source, record_ids(source), on_error)
    if examples is None:
        return
    assert len(examples) >= samples.RECORDS - 1
    assert_same_values(examples[0], clean[0])
    assert_same_values(examples[-1], clean[-1])


# --- CSV ---------------------------------------------------------------------------------

CSV_TOKENS = [
    "1", "-2", "+3", " 4 ", "3.5", ".5", "1e3", "1e999", "-1e-999", "nan", "inf", "-Infinity",
    "NA", "", "a", '"q"', '"a,b"', '"x""y"', '"open', 'mid"quote', "0x10", "1_0",
    "99999999999", "2147483648", "-2147483648", "\xe9", "\t", " ",
]  # fmt: skip
csv_lines = (
    st.builds(
        lambda tokens, encoding: ",".join(tokens).encode(encoding, "replace"),
        st.lists(st.sampled_from(CSV_TOKENS) | st.text(max_size=3), max_size=5),
        st.sampled_from(["utf-8", "latin-1"]),
    )
    | st.binary(max_size=30)
).map(lambda line: line.replace(b"\n", b"").replace(b"\r", b""))
CSV_DEFAULTS = (0, 0.0, "none")


def csv_reference(line: bytes) -> list | None:
    """The row as Python's csv module and the column types read it; None when it cannot."""
    text = line.decode("utf-8", "surrogateescape")
    try:
        (row,) = list(csv.reader([text], strict=True))
    except csv.Error:
        return None
    if len(row) != 3:
        return None
    if _quote_in_unquoted_field(text):
        return None
    values = []
    for field, default, kind in zip(row, CSV_DEFAULTS, (int, float, str), strict=True):
        if field in ("", "NA"):
            values.append(default)
            continue
        try:
            values.append(kind(field) if kind is not str else field)
        except ValueError:  # not a number: the row is flagged
            return None
    return values


def _quote_in_unquoted_field(text: str) -> bool:
    """Whether a field not opened by a quote holds one: TensorFlow's CSV parser refuses that
    row, Python's reads it."""
    quoted = in_quotes = False
    start = True
    for char in text:
        if start:
            quoted = in_quotes = char == '"'
            start = False
            if quoted:
                continue
        if quoted:
            if char == '"':
                in_quotes = not in_quotes
            elif char == "," and not in_quotes:
                start = True
        elif char == ",":
            start = True
        elif char == '"':
            return True
    return False


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("csv") / "rows.csv"
    path.write_bytes(b"n,x,name\n1,2.5,a\n")
    return path


@pytest.fixture(scope="module")
def csv_decode(csv_file):
    source = CSV(str(csv_file), record_defaults=list(CSV_DEFAULTS), na_value="NA")
    return tf.function(lambda line: source.decode(tf.constant("rows.csv:line 9"), line))


@FUZZ
@given(csv_lines)
def test_csv_rows_decode_as_python_reads_them_or_are_flagged(csv_decode, line):
    out = flagged_or_decoded(csv_decode, "rows.csv:line 9", tf.constant(line))
    assert out is not None, "a CSV row never needs TensorFlow's own error"
    if not is_ok(out):
        return
    expected = csv_reference(line)
    assert expected is not None, line
    n, x, name = expected
    assert int(out["n"]) == n
    np.testing.assert_allclose(float(out["x"]), np.float32(x), rtol=1e-6)
    assert out["name"].numpy() == name.encode("utf-8", "surrogateescape")


# --- FixedLength / CIFAR -----------------------------------------------------------------

CIFAR_RECORD = 1 + 32 * 32 * 3


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    path = tmp_path_factory.mktemp("cifar") / "data_batch_1.bin"
    path.write_bytes(bytes(range(256)) * (2 * CIFAR_RECORD // 256) + bytes(2 * CIFAR_RECORD % 256))
    source = CIFAR10(str(path))
    return source, tf.function(lambda payload: source.decode(tf.constant("c.bin:4"), payload))


def cifar_reference(record: bytes) -> tuple[int, np.ndarray]:
    planes = np.frombuffer(record[1:], np.uint8).reshape(3, 32, 32)
    return record[0], planes.transpose(1, 2, 0)


@FUZZ
@given(
    st.integers(0, 2**32 - 1).map(lambda seed: np.random.default_rng(seed).bytes(CIFAR_RECORD))
    | st.binary(max_size=40)
    | mutations(bytes(CIFAR_RECORD), max_cut=3)
)
def test_fixed_length_records_decode_exactly_or_are_flagged(cifar, payload):
    _, decode = cifar
    out = flagged_or_decoded(decode, "c.bin:4", tf.constant(payload))
    assert out is not None
    assert is_ok(out) == (len(payload) == CIFAR_RECORD)
    if is_ok(out):
        label, image = cifar_reference(payload)
        assert int(out[fields.LABEL]) == label
        np.testing.assert_array_equal(out[fields.IMAGE], image)


# --- Caffe LMDB --------------------------------------------------------------------------

CAFFE_BGR = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
CAFFE_VALID = caffe_db.raw_datum(CAFFE_BGR, label=3)
PNG_SIZE = (4, 5)
PNG = encode_image(np.arange(4 * 5 * 3, dtype=np.uint8).reshape(*PNG_SIZE, 3), "png")
JPEG = encode_image(np.full((4, 5, 3), 128, np.uint8), "jpeg")
caffe_data = (
    st.none()
    | st.binary(max_size=70)
    | st.sampled_from([PNG, JPEG, PNG[:30], JPEG[:40], b"\xff\xd8\xff junk", b"BM junk"])
)
caffe_values = (
    st.binary(max_size=60)
    | mutations(CAFFE_VALID, max_cut=10)
    | st.builds(
        caffe_db.datum,
        channels=st.none() | st.integers(-2, 4) | st.just(2**40 + 3),
        height=st.none() | st.integers(-1, 6) | st.just(2**32 + 4),
        width=st.none() | st.integers(-1, 6),
        data=caffe_data,
        label=st.none() | st.integers(-(2**31), 2**31 - 1),
        encoded=st.none() | st.booleans(),
    )
)


def caffe_reference(value: bytes) -> tuple[int, np.ndarray]:
    """Label and RGB image as Caffe reads a Datum that decoded."""
    datum = caffe_proto.message_class("Datum").FromString(value)
    if datum.encoded:
        image = tf.io.decode_image(datum.data, channels=3, expand_animations=False).numpy()
    else:
        planes = np.frombuffer(datum.data, np.uint8).reshape(
            datum.channels, datum.height, datum.width
        )
        image = planes.transpose(1, 2, 0)[..., ::-1]
    return datum.label, image


def caffe_source(path, values: list[bytes]):
    keys = [f"{i:05d}".encode() for i in range(len(values))]
    return oi.sources.CaffeLMDB(caffe_db.write_lmdb(path, dict(zip(keys, values, strict=True))))


@pytest.fixture(scope="module")
def caffe_decode(tmp_path_factory):
    source = caffe_source(tmp_path_factory.mktemp("lmdb") / "db", [CAFFE_VALID])
    return tf.function(
        lambda value, is_datum: source.decode(
            tf.constant("db:00007"), (tf.constant(b"00007"), value, is_datum)
        )
    )


@FUZZ
@given(caffe_values)
def test_caffe_datums_decode_as_caffe_reads_them_or_are_flagged(caffe_decode, value):
    is_datum = caffe_lmdb._parses("Datum", value)
    # The reader passes what is not a Datum as b"" (its flag says why).
    payload = value if is_datum else b""
    out = flagged_or_decoded(caffe_decode, "db:00007", tf.constant(payload), tf.constant(is_datum))
    if not is_ok(out):
        return
    label, image = caffe_reference(value)
    assert int(out[fields.LABEL]) == label
    np.testing.assert_array_equal(out[fields.IMAGE], image)


# --- Earth Engine ------------------------------------------------------------------------

EE_SIZE = (2, 3)
EE_BANDS = ["B1", "B2"]


def ee_feature(kind: str, values: list[float]) -> tf.train.Feature:
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[bytes(int(v) for v in values)]))


def ee_example(bands: dict) -> bytes:
    features = {name: ee_feature(*spec) for name, spec in bands.items() if spec is not None}
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


EE_VALID = ee_example({b: ("float", [float(i) for i in range(6)]) for b in EE_BANDS})
ee_band = st.none() | st.tuples(
    st.sampled_from(["float", "float", "int64", "bytes"]),
    st.lists(st.integers(0, 255).map(float), min_size=0, max_size=8),
)
ee_patches = (
    st.binary(max_size=60)
    | mutations(EE_VALID)
    | st.fixed_dictionaries({b: ee_band for b in EE_BANDS}).map(ee_example)
)


def ee_reference(serialized: bytes) -> np.ndarray:
    feature = tf.train.Example.FromString(serialized).features.feature
    planes = [np.reshape(feature[b].float_list.value, EE_SIZE) for b in EE_BANDS]
    return np.stack(planes, axis=-1)


def write_records(path, records: list[bytes]) -> str:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return str(path)


@pytest.fixture(scope="module")
def ee_decode(tmp_path_factory):
    path = write_records(tmp_path_factory.mktemp("ee") / "ee-00000.tfrecord", [EE_VALID])
    source = oi.sources.EarthEngine(path, bands=EE_BANDS, patch_size=EE_SIZE)
    return tf.function(
        lambda serialized: source.decode(
            tf.constant("ee-00000.tfrecord:patch 4"), (tf.constant(4, tf.int64), serialized)
        )
    )


@FUZZ
@given(ee_patches)
def test_earth_engine_patches_decode_exactly_or_are_flagged(ee_decode, serialized):
    out = flagged_or_decoded(ee_decode, "ee-00000.tfrecord:patch 4", tf.constant(serialized))
    if is_ok(out):
        np.testing.assert_array_equal(out[fields.IMAGE], ee_reference(serialized))


def ee_pixel(b1: list[float] | None, steps: list[list[int]] | None) -> bytes:
    pixel = tf.train.SequenceExample()
    if b1 is not None:
        pixel.context.feature["B1"].float_list.value.extend(b1)
    if steps is not None:
        feature_list = pixel.feature_lists.feature_list["T"]
        for step in steps:
            feature_list.feature.add().int64_list.value.extend(step)
    return pixel.SerializeToString()


EE_PIXEL = ee_pixel([1.5], [[2], [3]])
ee_pixels = st.lists(
    st.builds(
        ee_pixel,
        st.none() | st.lists(st.floats(-9, 9, width=32), max_size=2),
        st.none() | st.lists(st.lists(st.integers(-9, 9), max_size=2), max_size=3),
    )
    | mutations(EE_PIXEL, max_cut=4)
    | st.binary(max_size=20),
    max_size=3,
)


def ee_pixel_reference(pixels: list[bytes]) -> np.ndarray:
    values = []
    for serialized in pixels:
        pixel = tf.train.SequenceExample.FromString(serialized)
        steps = pixel.feature_lists.feature_list["T"].feature
        t = [v for step in steps for v in step.int64_list.value]
        values.append([pixel.context.feature["B1"].float_list.value[0], *t])
    return np.reshape(values, (1, 2, 3))


@pytest.fixture(scope="module")
def ee_sequence_decode(tmp_path_factory):
    path = write_records(tmp_path_factory.mktemp("ee") / "s-00000.tfrecord", [EE_PIXEL] * 2)
    source = oi.sources.EarthEngine(
        path, bands=["B1", "T"], patch_size=(1, 2), tensor_depths={"T": 2}, sequence_data=True
    )
    return tf.function(
        lambda serialized: source.decode(
            tf.constant("s-00000.tfrecord:patch 0"), (tf.constant(0, tf.int64), serialized)
        ),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )


@FUZZ
@given(ee_pixels)
def test_earth_engine_pixel_sequences_decode_exactly_or_are_flagged(ee_sequence_decode, pixels):
    serialized = tf.constant(pixels, tf.string, shape=[len(pixels)])
    out = flagged_or_decoded(ee_sequence_decode, "s-00000.tfrecord:patch 0", serialized)
    if is_ok(out):
        np.testing.assert_array_equal(out[fields.IMAGE], ee_pixel_reference(pixels))


# --- DetectionCSV ------------------------------------------------------------------------

DETECTION_HEADER = "filename,width,height,class,xmin,ymin,xmax,ymax"
DETECTION_ROW = ["a.png", "5", "4", "cat", "1", "1", "3", "3"]
DETECTION_TOKENS = [
    "", "nan", "inf", "-inf", "-1", "0", "1e308", "99999999999", "2147483648", "x", "5", "4",
    "3.5", "b.png", '"q,"', "\xe9", " 2 ",
]  # fmt: skip
detection_rows = st.lists(
    st.lists(st.tuples(st.integers(0, 7), st.sampled_from(DETECTION_TOKENS)), max_size=3),
    min_size=1,
    max_size=3,
)


def detection_csv(edits_per_row: list[list[tuple[int, str]]]) -> list[list[str]]:
    rows = []
    for edits in edits_per_row:
        row = list(DETECTION_ROW)
        for column, token in edits:
            row[column] = token
        rows.append(row)
    return rows


def detection_reference(rows: list[list[str]]) -> list[list[float]]:
    """Normalized [ymin, xmin, ymax, xmax] of each row with a class, as the CSV states them."""
    boxes = []
    for _, width, height, name, *coords in rows:
        if name.strip():
            xmin, ymin, xmax, ymax = (float(c) for c in coords)
            w, h = int(width), int(height)
            boxes.append([ymin / h, xmin / w, ymax / h, xmax / w])
    return boxes


def detection_classes(rows: list[list[str]]) -> list[int]:
    """Class id of each row with a class: ids in order of first appearance of the names."""
    names = [row[3].strip() for row in rows if row[3].strip()]
    ids = {name: i + 1 for i, name in enumerate(dict.fromkeys(names))}
    return [ids[name] for name in names]


@pytest.fixture(scope="module")
def image_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("images")
    (folder / "a.png").write_bytes(PNG)
    return folder


def write_detection_csv(path, rows: list[list[str]], encoding: str = "utf-8") -> None:
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    path.write_bytes((DETECTION_HEADER + "\n" + text.getvalue()).encode(encoding, "replace"))


@FUZZ
@given(detection_rows, st.sampled_from(["utf-8", "latin-1"]))
def test_detection_csv_rows_give_exact_boxes_or_an_error_naming_file_and_line(
    tmp_path_factory, image_dir, edits, encoding
):
    path = tmp_path_factory.mktemp("detection") / "boxes.csv"
    rows = detection_csv(edits)
    write_detection_csv(path, rows, encoding)
    try:
        source = oi.sources.DetectionCSV(str(path), image_dir)
    except ValueError as err:
        assert str(path) in str(err), str(err)
        return
    out = flagged_or_decoded(
        source.decode, "boxes.csv:", tf.constant("boxes.csv:"), tf.constant(0, tf.int64)
    )
    if (int(rows[0][2]), int(rows[0][1])) != PNG_SIZE:
        # The rows give a.png another size than it has: the one thing known only once decoded.
        assert int(out[fields.ERROR]) == errors.code("image_size"), out[fields.ERROR_DETAIL]
        return
    assert is_ok(out), out[fields.ERROR_DETAIL]
    np.testing.assert_allclose(out[fields.BOXES], detection_reference(rows), rtol=1e-6)
    assert out[fields.CLASSES].numpy().tolist() == detection_classes(rows)


images = (
    st.binary(max_size=40)
    | mutations(PNG, max_cut=40)
    | mutations(JPEG, max_cut=40)
    | st.sampled_from([PNG, JPEG, encode_image(np.zeros((5, 4, 3), np.uint8), "png")])
)


@FUZZ
@given(images)
def test_detection_csv_images_decode_or_are_flagged(tmp_path_factory, image_bytes):
    folder = tmp_path_factory.mktemp("detection")
    (folder / "a.png").write_bytes(image_bytes)
    write_detection_csv(folder / "boxes.csv", [DETECTION_ROW])
    source = oi.sources.DetectionCSV(str(folder / "boxes.csv"), folder)
    out = flagged_or_decoded(
        source.decode, "boxes.csv:line 2", tf.constant("boxes.csv:line 2"), tf.constant(0, tf.int64)
    )
    if is_ok(out):
        expected = tf.io.decode_image(image_bytes, channels=3, expand_animations=False)
        np.testing.assert_array_equal(out[fields.IMAGE], expected)
        assert out[fields.IMAGE].shape == (4, 5, 3)


# --- Arrays and Generator ----------------------------------------------------------------

coordinates = st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.0000001, -1e-7, 1.5, -0.5, np.nan, np.inf])
example_boxes = st.lists(st.lists(coordinates, min_size=4, max_size=4), max_size=3)
example_classes = st.lists(st.sampled_from([1, 2, 0, -1, 7]), max_size=3)


def boxes_reference(boxes: list[list[float]], classes: list[int]) -> str | None:
    """The reason a box list fails its checks, None when it passes."""
    array = np.asarray(boxes, np.float32).reshape(-1, 4)
    if not np.isfinite(array).all():
        return "box_not_finite"
    if ((array[:, 0] > array[:, 2]) | (array[:, 1] > array[:, 3])).any():
        return "box_order"
    if ((array < -1e-5) | (array > 1 + 1e-5)).any():
        return "box_out_of_range"
    if len(classes) != len(array):
        return "class_count"
    if any(c < 1 for c in classes):
        return "class_range"
    return None


@FUZZ
@given(example_boxes, example_classes)
def test_arrays_boxes_pass_exactly_or_are_flagged_with_their_reason(boxes, classes):
    source = oi.sources.Arrays(
        {
            fields.IMAGE: np.zeros((1, 4, 5, 3), np.uint8),
            fields.BOXES: [np.asarray(boxes, np.float32).reshape(-1, 4)],
            fields.CLASSES: [np.asarray(classes, np.int32)],
        }
    )
    (record_id, payload), *_ = source.records(oi.sources.ReadContext(shuffle=False))
    out = flagged_or_decoded(source.decode, "arrays:0", record_id, payload)
    reason = boxes_reference(boxes, classes)
    if reason is None:
        assert is_ok(out), out[fields.ERROR_DETAIL]
        expected = np.clip(np.asarray(boxes, np.float32).reshape(-1, 4), 0, 1)
        np.testing.assert_array_equal(out[fields.BOXES], expected)
    else:
        assert errors.reason_of(int(out[fields.ERROR])) == reason


SIGNATURE = {
    fields.IMAGE: tf.TensorSpec([None, None, 3], tf.uint8),
    fields.BOXES: tf.TensorSpec([None, 4], tf.float32),
    fields.CLASSES: tf.TensorSpec([None], tf.int32),
}
GOOD_ELEMENT = {
    fields.IMAGE: np.zeros((4, 5, 3), np.uint8),
    fields.BOXES: np.array([[0.1, 0.1, 0.5, 0.5]], np.float32),
    fields.CLASSES: np.array([1], np.int32),
}
# field -> (values that pass, values that fail)
ELEMENT_VALUES = {
    fields.IMAGE: (
        [np.full((4, 5, 3), 7, np.uint8), np.full((2, 2, 3), 9.0)],
        [np.zeros((4, 5), np.uint8), "image", np.full((2, 2, 3), 0.5)],
    ),
    fields.BOXES: (
        [[[0, 0, 1, 1]], np.zeros((0, 4))],
        [np.zeros((3,), np.float32), [[0.1, 0.2, 0.3, np.nan]], [["a", 0, 0, 0]], [[0, 0, 2, 1]]],
    ),
    fields.CLASSES: ([[1], np.array([3], np.int64)], [[0], [2**40], ["x"], 1, [1.5]]),
}
bad_elements = st.fixed_dictionaries(
    {}, optional={k: st.sampled_from(good + bad) for k, (good, bad) in ELEMENT_VALUES.items()}
) | st.sampled_from([None, 7, []])


def element_passes(element) -> bool:
    if not isinstance(element, dict) or set(element) != set(ELEMENT_VALUES):
        return False
    num_boxes = np.shape(element[fields.BOXES])[0]
    if np.shape(element[fields.CLASSES]) != (num_boxes,):
        return False
    return all(
        any(element[k] is value for value in good) for k, (good, _) in ELEMENT_VALUES.items()
    )


@PIPELINE
@given(bad_elements, st.sampled_from(["raise", "skip"]))
def test_generator_yielding_a_fuzzed_element_through_make_dataset(element, on_error):
    source = oi.sources.Generator(lambda: iter([GOOD_ELEMENT, element, GOOD_ELEMENT]), SIGNATURE)
    examples = through_pipeline(source, "generator:1", on_error)
    if examples is None:
        assert not element_passes(element)
        return
    ids = [e[fields.RECORD_ID].numpy() for e in examples]
    if element_passes(element):
        assert ids == [b"generator:0", b"generator:1", b"generator:2"]
        for name in ELEMENT_VALUES:
            np.testing.assert_array_equal(examples[1][name], np.asarray(element[name]))
    else:
        assert ids == [b"generator:0", b"generator:2"]


# --- TFDS --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tfds_data():
    """tests/tfds_builders.py (which skips without tensorflow-datasets)."""
    import tfds_builders

    return tfds_builders


@pytest.fixture(scope="module")
def tfds_decode(tfds_data, tmp_path_factory):
    """TinyDetection's (coco's layout) decode of a record: no data needs preparing for it."""
    builder = tfds_data.TinyDetection(config="png", data_dir=tmp_path_factory.mktemp("tfds"))
    source = oi.sources.TFDS(builder, split="train")

    def decode(image, boxes, labels):
        payload = {
            fields.IMAGE: image,
            fields.BOXES: boxes,
            fields.CLASSES: labels,
            fields.IS_CROWD: tf.zeros(tf.shape(labels), tf.bool),
            fields.SOURCE_ID: tf.constant(7, tf.int64),
        }
        return source.decode(tf.constant("tiny:7"), payload)

    signature = [
        tf.TensorSpec([], tf.string),
        tf.TensorSpec([None, 4], tf.float32),
        tf.TensorSpec([None], tf.int64),
    ]
    return tf.function(decode, input_signature=signature)


def decoded_image(data: bytes) -> np.ndarray | None:
    """The RGB pixels TensorFlow decodes ``data`` to; None when it cannot."""
    try:
        return tf.io.decode_image(data, channels=3, expand_animations=False).numpy()
    except tf.errors.InvalidArgumentError:
        return None


tfds_coordinate = st.one_of(
    st.floats(-0.5, 1.5, width=32), st.sampled_from([np.nan, np.inf, 0.0, 1.0, 1 + 1e-6])
)


@FUZZ
@given(
    boxes=st.lists(st.lists(tfds_coordinate, min_size=4, max_size=4), max_size=3),
    labels=st.lists(st.integers(-2, 3), max_size=4),
)
def test_tfds_boxes_and_class_labels_decode_exactly_or_are_flagged(
    tfds_data, tfds_decode, boxes, labels
):
    array = np.array(boxes, np.float32).reshape(-1, 4)
    image = tf.io.encode_png(tfds_data.pixels(0, 4, 6))
    out = flagged_or_decoded(tfds_decode, "tiny:7", image, array, tf.constant(labels, tf.int64))
    # ClassLabel ids are 0-based: the pipeline's classes are id + 1.
    reason = boxes_reference(boxes, [label + 1 for label in labels])
    assert out is not None
    if reason is None:
        assert is_ok(out), out[fields.ERROR_DETAIL]
        np.testing.assert_array_equal(out[fields.BOXES], np.clip(array, 0, 1))
        np.testing.assert_array_equal(out[fields.CLASSES], np.array(labels) + 1)
        np.testing.assert_array_equal(out[fields.IMAGE], tfds_data.pixels(0, 4, 6))
    else:
        assert errors.reason_of(int(out[fields.ERROR])) == reason
        assert "objects/" in out[fields.ERROR_DETAIL].numpy().decode()


@FUZZ
@given(images)
def test_tfds_image_bytes_decode_exactly_or_are_flagged_or_fail_in_tensorflow(
    tfds_decode, image_bytes
):
    boxes = np.array([[0.1, 0.1, 0.5, 0.5]], np.float32)
    out = flagged_or_decoded(tfds_decode, "tiny:7", image_bytes, boxes, tf.constant([0], tf.int64))
    expected = decoded_image(image_bytes)
    magic = any(image_bytes.startswith(m) for m in (b"\xff\xd8\xff", b"\x89PNG", b"GIF8", b"BM"))
    if not magic:
        # Bytes that are no image at all are flagged, naming the record and the feature.
        assert errors.reason_of(int(out[fields.ERROR])) == "not_an_image"
        assert "feature image " in out[fields.ERROR_DETAIL].numpy().decode()
        return
    # A damaged image of a known format fails in TensorFlow's decoder (the pipeline names it).
    assert (out is None) == (expected is None)
    if expected is not None:
        assert is_ok(out), out[fields.ERROR_DETAIL]
        np.testing.assert_array_equal(out[fields.IMAGE], expected)
        np.testing.assert_array_equal(out[fields.BOXES], boxes)


GOOD_BOXES, GOOD_CLASSES = np.array([[0.1, 0.1, 0.5, 0.5]], np.float32), [1]


def raw_tfds_through_pipeline(tfds_data, tmp_path, example, on_error):
    """A prepared RawDetection of ``example`` between two good ones through make_dataset, by id
    (checked by :func:`through_pipeline`); None when ``raise`` stopped on it."""
    good = (PNG, GOOD_BOXES, GOOD_CLASSES)
    builder = tfds_data.RawDetection(examples=[good, example, good], data_dir=tmp_path)
    tfds_data.prepare(builder)
    source = oi.sources.TFDS(builder, split="train", fields=tfds_data.RAW_FIELDS)
    examples = through_pipeline(source, tfds_data.record_ids(builder)[1], on_error)
    if examples is None:
        return None
    by_id = {int(e[fields.SOURCE_ID]): e for e in examples}
    assert sorted(by_id) in ([0, 1, 2], [0, 2])
    for index in (0, 2):
        np.testing.assert_array_equal(by_id[index][fields.IMAGE], decoded_image(PNG))
        np.testing.assert_array_equal(by_id[index][fields.BOXES], GOOD_BOXES)
    return by_id


@pytest.mark.slow
@PIPELINE
@given(images, st.sampled_from(["raise", "skip"]))
def test_tfds_dataset_with_a_fuzzed_image_through_make_dataset(
    tfds_data, tmp_path_factory, image_bytes, on_error
):
    example = (image_bytes, GOOD_BOXES, GOOD_CLASSES)
    tmp_path = tmp_path_factory.mktemp("tfds")
    by_id = raw_tfds_through_pipeline(tfds_data, tmp_path, example, on_error)
    expected = decoded_image(image_bytes)
    if by_id is None:
        assert expected is None
        return
    assert (1 in by_id) == (expected is not None)
    if expected is not None:
        np.testing.assert_array_equal(by_id[1][fields.IMAGE], expected)


@PIPELINE
@given(example_boxes, example_classes, st.sampled_from(["raise", "skip"]))
def test_tfds_dataset_with_fuzzed_boxes_through_make_dataset(
    tfds_data, tmp_path_factory, boxes, classes, on_error
):
    tmp_path = tmp_path_factory.mktemp("tfds")
    by_id = raw_tfds_through_pipeline(tfds_data, tmp_path, (PNG, boxes, classes), on_error)
    passes = boxes_reference(boxes, classes) is None
    if by_id is None:
        assert not passes
        return
    assert (1 in by_id) == passes
    if passes:
        expected = np.clip(np.asarray(boxes, np.float32).reshape(-1, 4), 0, 1)
        np.testing.assert_array_equal(by_id[1][fields.BOXES], expected)
        np.testing.assert_array_equal(by_id[1][fields.CLASSES], classes)


# --- Hugging Face ------------------------------------------------------------------------

# The row fuzzed, between rows 0 and 2: a 4 x 4 image without objects of its own.
HF_ROW = 1


@pytest.fixture(scope="module")
def hf_data():
    """tests/hf_datasets.py (which skips without datasets)."""
    import hf_datasets

    return hf_datasets


def hf_source(hf_data, rows, image=None, objects=None):
    """HuggingFace over ``rows`` of the test dataset (named "toy"), :data:`HF_ROW` with
    ``image`` (whose size its width and height columns then give as PNG_SIZE) or ``objects``."""
    columns = hf_data.detection_rows(
        rows=rows,
        images=None if image is None else {HF_ROW: image},
        objects=None if objects is None else {HF_ROW: objects},
    )
    if image is not None:
        position = rows.index(HF_ROW)
        columns["height"][position], columns["width"][position] = PNG_SIZE
    dataset = hf_data.datasets.Dataset.from_dict(
        columns, features=hf_data.SEQUENCE_FEATURES, split="train"
    )
    return oi.sources.HuggingFace(dataset, name="toy")


def hf_decoded(source) -> dict | None:
    """:func:`flagged_or_decoded` of the one record of ``source``."""
    ((record_id, payload, *_),) = source.records(oi.sources.ReadContext(shuffle=False))
    return flagged_or_decoded(source.decode, "toy/train:0", record_id, payload)


hf_coordinate = st.one_of(
    st.integers(-1, 5).map(float),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e30]),
)


def hf_objects(objects: list[tuple], extra_categories: list[int], drop_crowd: bool) -> tuple:
    """An objects cell (COCO boxes, 0-based categories, crowd flags, areas): one of each per
    object, then ``extra_categories`` and, with ``drop_crowd``, one crowd flag fewer."""
    boxes = [box for box, _, _ in objects]
    crowd = [flag for _, _, flag in objects]
    categories = [category for _, category, _ in objects] + extra_categories
    return boxes, categories, crowd[: len(crowd) - drop_crowd], [1] * len(boxes)


hf_cells = st.builds(
    hf_objects,
    st.lists(
        st.tuples(
            st.lists(hf_coordinate, min_size=4, max_size=4), st.integers(-1, 2), st.booleans()
        ),
        max_size=2,
    ),
    st.lists(st.integers(-1, 2), max_size=1),
    st.booleans(),
)


def hf_reference(cell: tuple, size: tuple[int, int]) -> tuple[np.ndarray, str | None]:
    """A cell's boxes normalized [ymin, xmin, ymax, xmax] (float32, as the pipeline computes),
    and the reason the row is flagged for, None when it is not."""
    boxes, categories, crowd, _ = cell
    x, y, w, h = np.asarray(boxes, np.float32).reshape(-1, 4).T
    height, width = np.float32(size[0]), np.float32(size[1])
    with np.errstate(invalid="ignore", over="ignore"):
        normalized = np.stack([y / height, x / width, (y + h) / height, (x + w) / width], axis=1)
    reason = boxes_reference(normalized, [category + 1 for category in categories])
    if reason is None and len(crowd) != len(boxes):
        reason = "per_box_count"
    return normalized, reason


@pytest.mark.slow
@FUZZ
@given(hf_cells)
def test_hf_objects_decode_exactly_or_are_flagged_for_their_reason(hf_data, cell):
    out = hf_decoded(hf_source(hf_data, [HF_ROW], objects=cell))
    assert out is not None
    normalized, reason = hf_reference(cell, hf_data.SIZES[HF_ROW])
    if reason is None:
        assert is_ok(out), out[fields.ERROR_DETAIL]
        np.testing.assert_array_equal(out[fields.BOXES], np.clip(normalized, 0, 1))
        assert out[fields.CLASSES].numpy().tolist() == [c + 1 for c in cell[1]]
        assert out[fields.IS_CROWD].numpy().tolist() == cell[2]
        np.testing.assert_array_equal(out[fields.IMAGE], hf_data.image(HF_ROW))
    else:
        assert errors.reason_of(int(out[fields.ERROR])) == reason
        assert out[fields.ERROR_DETAIL].numpy().decode().startswith("record toy/train:0")
        assert out[fields.BOXES].shape == (0, 4)


def hf_image_reference(data: bytes) -> np.ndarray | None:
    """The pixels of the fuzzed row's image bytes; None when the row is flagged or fails: bytes
    TensorFlow cannot decode, or that decode to another size than its columns give."""
    expected = decoded_image(data)
    return expected if expected is not None and expected.shape[:2] == PNG_SIZE else None


@pytest.mark.slow
@FUZZ
@given(images)
def test_hf_image_bytes_decode_exactly_or_are_flagged(hf_data, image_bytes):
    out = hf_decoded(hf_source(hf_data, [HF_ROW], image=image_bytes))
    expected = hf_image_reference(image_bytes)
    assert is_ok(out) == (expected is not None)
    if expected is not None:
        np.testing.assert_array_equal(out[fields.IMAGE], expected)


def hf_through_pipeline(hf_data, on_error, **fuzzed) -> dict | None:
    """Rows 0-2, :data:`HF_ROW` fuzzed, through make_dataset by row (checked by
    :func:`through_pipeline`); None when ``raise`` stopped on the fuzzed row."""
    source = hf_source(hf_data, [0, HF_ROW, 2], **fuzzed)
    examples = through_pipeline(source, f"toy/train:{HF_ROW}", on_error)
    if examples is None:
        return None
    by_row = {int(e[fields.RECORD_ID].numpy().decode().rsplit(":", 1)[1]): e for e in examples}
    assert sorted(by_row) in ([0, 1, 2], [0, 2])
    for row in (0, 2):
        np.testing.assert_array_equal(by_row[row][fields.IMAGE], hf_data.image(row))
        np.testing.assert_array_equal(by_row[row][fields.BOXES], hf_data.expected_boxes(row))
    return by_row


@pytest.mark.slow
@PIPELINE
@given(hf_cells, st.sampled_from(["raise", "skip"]))
def test_hf_dataset_with_fuzzed_objects_through_make_dataset(hf_data, cell, on_error):
    normalized, reason = hf_reference(cell, hf_data.SIZES[HF_ROW])
    by_row = hf_through_pipeline(hf_data, on_error, objects=cell)
    if by_row is None:
        assert reason is not None
        return
    assert (HF_ROW in by_row) == (reason is None)
    if reason is None:
        np.testing.assert_array_equal(by_row[HF_ROW][fields.BOXES], np.clip(normalized, 0, 1))
