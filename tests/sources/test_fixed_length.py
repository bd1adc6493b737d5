"""Fixed-length records and the CIFAR presets, read back byte for byte from files written here."""

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields
from object_input.sources import CIFAR10, CIFAR100, Field, FixedLength, formats
from object_input.writers import write_cifar10, write_cifar100

# One file after the other, so that examples come in file order.
IN_ORDER = {"reading": {"num_readers": 1}}


def _images(n, seed=0):
    return np.random.default_rng(seed).integers(0, 256, [n, 32, 32, 3], dtype=np.uint8)


def _cifar_bytes(labels, images):
    """Records laid out as the CIFAR pages say: label byte(s), then R, G and B planes."""
    out = b""
    for label, image in zip(labels, images, strict=True):
        head = bytes(label) if isinstance(label, tuple) else bytes([label])
        out += head + image.transpose(2, 0, 1).tobytes()
    return out


@pytest.fixture
def cifar10_dir(tmp_path):
    images = _images(7)
    labels = [3, 0, 9, 1, 4, 4, 8]
    (tmp_path / "data_batch_1.bin").write_bytes(_cifar_bytes(labels[:4], images[:4]))
    (tmp_path / "data_batch_2.bin").write_bytes(_cifar_bytes(labels[4:], images[4:]))
    (tmp_path / "batches.meta.txt").write_text("airplane\nautomobile\n")
    return tmp_path, labels, images


def test_cifar10_reads_labels_and_planar_images_exactly(cifar10_dir):
    path, labels, images = cifar10_dir
    examples = list(oi.make_dataset(CIFAR10(path), batch_size=None, shuffle=False, **IN_ORDER))
    assert [int(x[fields.LABEL]) for x in examples] == labels
    for example, image in zip(examples, images, strict=True):
        assert example[fields.IMAGE].dtype == tf.uint8
        assert example[fields.LABEL].dtype == tf.int32
        np.testing.assert_array_equal(example[fields.IMAGE].numpy(), image)
        assert example[fields.IMAGE_SHAPE].numpy().tolist() == [32, 32]
    assert examples[5][fields.RECORD_ID].numpy().decode() == f"{path}/data_batch_2.bin:1"
    assert CIFAR10(path).num_records == 7


def test_cifar10_first_pixel_is_the_first_byte_of_each_plane(tmp_path):
    record = bytes([7]) + bytes([10]) + bytes(1023) + bytes([20]) + bytes(1023) + bytes([30])
    record += bytes(1023)
    (tmp_path / "one.bin").write_bytes(record)
    (example,) = oi.make_dataset(str(tmp_path / "one.bin"), batch_size=None)
    assert int(example[fields.LABEL]) == 7
    assert example[fields.IMAGE].numpy()[0, 0].tolist() == [10, 20, 30]
    assert int(tf.reduce_sum(tf.cast(example[fields.IMAGE], tf.int32))) == 60


def test_cifar100_reads_fine_and_coarse_labels(tmp_path):
    images = _images(3, seed=1)
    pairs = [(11, 52), (0, 99), (19, 3)]  # (coarse, fine)
    tf.io.gfile.makedirs("ram://cifar100")
    with tf.io.gfile.GFile("ram://cifar100/train.bin", "wb") as f:
        f.write(_cifar_bytes(pairs, images))
    dataset = oi.make_dataset("ram://cifar100", format="cifar100", batch_size=3, shuffle=False)
    (batch,) = dataset
    assert batch[fields.LABEL].numpy().tolist() == [52, 99, 3]
    assert batch[fields.COARSE_LABEL].numpy().tolist() == [11, 0, 19]
    np.testing.assert_array_equal(batch[fields.IMAGE].numpy(), images)


def test_bin_suffix_means_cifar10_and_both_formats_are_listed():
    assert formats()["cifar10"] == (".bin",) and formats()["cifar100"] == (".bin",)


def test_size_not_a_multiple_of_the_record_is_an_error_naming_file_and_numbers(cifar10_dir):
    path, labels, images = cifar10_dir
    bad = path / "data_batch_3.bin"
    bad.write_bytes(_cifar_bytes(labels[:2], images[:2]) + b"\0" * 5)
    with pytest.raises(ValueError, match=r"data_batch_3\.bin: file size 6151 bytes .* 3073-byte"):
        oi.make_dataset(str(path))
    with pytest.raises(ValueError, match=r"data_batch_1\.bin: file size 12292 bytes .* 3074-byte"):
        CIFAR100(path / "data_batch_1.bin")


def test_fixed_length_layout_with_header_footer_dtypes_and_order(tmp_path):
    header, footer = b"HEAD", b"FT"
    values = np.array([[1.5, -2.0], [0.25, 8.0]], "<f4")
    ids = np.array([70000, 3], ">i4")
    body = b"".join(b"\xab" + values[i].tobytes() + ids[i : i + 1].tobytes() for i in range(2))
    path = tmp_path / "records.dat"
    path.write_bytes(header + body + footer)
    source = FixedLength(
        path,
        record_bytes=13,
        header_bytes=4,
        footer_bytes=2,
        fields={
            "tag": Field(0),
            "values": Field(1, "float32", (2,)),
            "id": Field(9, tf.int32, little_endian=False, cast=tf.int64),
        },
    )
    examples = list(oi.make_dataset(source, batch_size=None, shuffle=False))
    assert [int(x["tag"]) for x in examples] == [0xAB, 0xAB]
    np.testing.assert_array_equal(np.stack([x["values"] for x in examples]), values)
    assert [int(x["id"]) for x in examples] == [70000, 3]
    assert examples[0]["id"].dtype == tf.int64


def test_fixed_length_layout_errors(tmp_path):
    path = tmp_path / "r.dat"
    path.write_bytes(b"\0" * 8)
    with pytest.raises(ValueError, match=r"field 'x' takes bytes 4\.\.11 but a record has 8"):
        FixedLength(path, record_bytes=8, fields={"x": Field(4, tf.int64)})
    with pytest.raises(ValueError, match=r"chw_to_hwc needs a \[C, H, W\] shape"):
        Field(0, shape=(4, 4), chw_to_hwc=True)
    with pytest.raises(ValueError, match="fields must lay out"):
        FixedLength(path, record_bytes=8, fields={})


def test_cifar10_through_augmentation_both_batchings_and_keras(cifar10_dir):
    path, labels, _ = cifar10_dir
    augment = [("random_horizontal_flip", {"probability": 1.0})]
    kwargs = {"augment": augment, "batch_size": 4, "shuffle": False, **IN_ORDER}
    flipped = list(oi.make_dataset(CIFAR10(path), **kwargs))
    plain = list(oi.make_dataset(CIFAR10(path), batch_size=None, shuffle=False, **IN_ORDER))
    np.testing.assert_array_equal(
        flipped[0][fields.IMAGE].numpy()[1], plain[1][fields.IMAGE].numpy()[:, ::-1]
    )
    static = list(
        oi.make_dataset(
            CIFAR10(path),
            batching="static",
            image_size=(16, 16),
            drop_remainder=True,
            **kwargs,
        )
    )
    assert len(static) == 1 and static[0][fields.IMAGE].shape == (4, 16, 16, 3)
    assert fields.NUM_BOXES not in static[0]
    pairs = list(oi.make_dataset(CIFAR10(path), keras=True, **kwargs))
    assert [tuple(p[0].shape) for p in pairs] == [(4, 32, 32, 3), (3, 32, 32, 3)]
    assert np.concatenate([p[1].numpy() for p in pairs]).tolist() == labels
    restored = oi.unpad_batch(flipped[1])
    assert [int(x[fields.LABEL]) for x in restored] == labels[4:]
    assert restored[0][fields.IMAGE].shape == (32, 32, 3)


def test_cifar_writers_write_the_layout(tmp_path):
    images = _images(3, seed=2)
    write_cifar10(tmp_path / "ten.bin", images, [1, 2, 3])
    assert (tmp_path / "ten.bin").read_bytes() == _cifar_bytes([1, 2, 3], images)
    write_cifar100(tmp_path / "hundred.bin", images, [50, 60, 70], [5, 6, 7])
    expected = _cifar_bytes([(5, 50), (6, 60), (7, 70)], images)
    assert (tmp_path / "hundred.bin").read_bytes() == expected
    with pytest.raises(ValueError, match=r"uint8 \[N, 32, 32, 3\]"):
        write_cifar10(tmp_path / "x.bin", images[:, :16], [1, 2, 3])
    with pytest.raises(ValueError, match="one byte"):
        write_cifar10(tmp_path / "x.bin", images, [1, 2, 300])


@pytest.mark.parametrize("size", [0, 1, 1 + 32 * 32 * 3 + 1])
def test_a_payload_of_another_size_is_flagged_naming_the_record(tmp_path, size):
    # decode reshaped whatever it was given: TensorFlow's reshape error, without the record.
    path = tmp_path / "data_batch_1.bin"
    path.write_bytes(bytes(1 + 32 * 32 * 3))
    out = CIFAR10(str(path)).decode(tf.constant("x.bin:3"), tf.constant(bytes(size)))
    assert oi.reliability.errors.reason_of(int(out[fields.ERROR])) == "undecodable"
    assert out[fields.ERROR_DETAIL].numpy().decode() == (
        f"record x.bin:3: has {size} bytes, expected record_bytes=3073"
    )
    assert out[fields.IMAGE].shape == (32, 32, 3)
