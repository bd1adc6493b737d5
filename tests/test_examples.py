"""The example training script runs end to end."""

import os
import pathlib
import subprocess
import sys

import tensorflow as tf

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def test_train_keras_example_fits(tmp_path):
    # The checkout first on the path: the examples run against this tree, installed or not.
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=path)
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "train_keras.py"), "--epochs", "1", "--steps", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "2/2" in result.stdout and "loss:" in result.stdout


def test_earthengine_example_trains_writes_back_and_stitches(tmp_path):
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=path)
    script = EXAMPLES / "earthengine_segmentation.py"
    result = subprocess.run(
        [sys.executable, str(script), "--out", "ee", "--epochs", "1", "--steps", "3"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "24 patches, 4 × 6" in result.stdout and "wrote 24 patches" in result.stdout
    png = tf.io.decode_png(tf.io.read_file(str(tmp_path / "ee/water.png")))
    assert png.shape == (64, 96 * 2 + 2, 1)
    written = tf.data.TFRecordDataset(str(tmp_path / "ee/predictions.tfrecord.gz"), "GZIP")
    assert sum(1 for _ in written) == 24
