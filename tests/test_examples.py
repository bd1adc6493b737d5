"""The example scripts run end to end."""

import os
import pathlib
import re
import subprocess
import sys

import pytest
import tensorflow as tf

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _run_example(name, *args, cwd, status=0):
    # The checkout first on the path: the examples run against this tree, installed or not.
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=path)
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=cwd,
    )
    assert result.returncode == status, result.stderr[-3000:]
    return result.stdout if status == 0 else result.stderr


@pytest.mark.slow
def test_train_keras_example_fits(tmp_path):
    out = _run_example("train_keras.py", "--epochs", "1", "--steps", "2", cwd=tmp_path)
    assert "2/2" in out and "loss:" in out


@pytest.mark.slow
def test_train_keras_example_stops_at_a_bad_record_with_our_message(tmp_path):
    import numpy as np

    from object_input.writers import build_example, encode_image, write_tfrecords

    jpeg = encode_image(np.zeros((32, 32, 3), np.uint8), "jpeg")
    broken = build_example(jpeg[: len(jpeg) // 2], image_format="jpeg", height=32, width=32)
    write_tfrecords([broken] * 8, tmp_path / "data" / "train")
    err = _run_example("train_keras.py", "--data", "data", "--steps", "1", cwd=tmp_path, status=1)
    # The exception's message starts with the record (several, batched) and the reason.
    assert re.search(
        r"^tensorflow\.python\.framework\.errors_impl\.InvalidArgumentError: records? "
        r"data/train-00000-of-00001\.tfrecord:\d+\b.*: undecodable: ",
        err,
        re.M,
    ), err
    assert "function_node" not in err, err


@pytest.mark.slow
def test_earthengine_example_trains_writes_back_and_stitches(tmp_path):
    out = _run_example(
        "earthengine_segmentation.py", "--out", "ee", "--epochs", "1", "--steps", "3", cwd=tmp_path
    )
    assert "24 patches, 4 × 6" in out and "wrote 24 patches" in out
    png = tf.io.decode_png(tf.io.read_file(str(tmp_path / "ee/water.png")))
    assert png.shape == (64, 96 * 2 + 2, 1)
    written = tf.data.TFRecordDataset(str(tmp_path / "ee/predictions.tfrecord.gz"), "GZIP")
    assert sum(1 for _ in written) == 24


@pytest.mark.slow
def test_caffe_lmdb_example_trains_through_the_data_layer(tmp_path):
    folder = tmp_path / "caffe"
    out = _run_example(
        "caffe_lmdb.py", "--epochs", "1", "--steps", "2", "--output", str(folder), cwd=tmp_path
    )
    assert "2/2" in out and "TEST: loss" in out
    assert (folder / "stripes_lmdb" / "data.mdb").exists()


@pytest.mark.slow
def test_cifar10_keras_example_fits_on_generated_records(tmp_path):
    out = _run_example(
        "cifar10_keras.py", "--generate", "64", "--epochs", "1", "--steps", "2", cwd=tmp_path
    )
    assert "2/2" in out and "test: loss" in out
