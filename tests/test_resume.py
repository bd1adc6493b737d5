"""Exact resume: batches before a checkpoint plus batches after a restore in a fresh process equal
an uninterrupted run with the same seed (record and file shuffle, augmentation, skips, partners,
aspect-ratio buckets, the device stage), from a place of a few integers."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input.writers import build_example

PIPELINE = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import object_input as oi

    def make(files, on_error):
        return oi.make_dataset(
            files, batch_size=3, seed=11, shuffle_buffer_size=5, num_epochs=2,
            augment=[("random_horizontal_flip", {}), ("random_crop_image", {}),
                     ("random_adjust_brightness", {})],
            image_size=(8, 8), on_error=on_error, reading={"num_readers": 2},
        )

    def summary(batch):
        return [batch["source_id"].numpy().astype(str).tolist(),
                float(tf.reduce_sum(tf.cast(batch["image"], tf.float64))),
                batch["boxes"].numpy().round(5).tolist()]
    """
)

WORKER = PIPELINE + textwrap.dedent(
    """
    files, on_error, mode, directory, steps = sys.argv[1:6]
    files = files.split(",")
    dataset = make(files, on_error)
    checkpoint = tf.train.Checkpoint(data=oi.iterations.progress_of(dataset))
    if mode == "save":
        iterator = iter(dataset)
        batches = [summary(next(iterator)) for _ in range(int(steps))]
        checkpoint.save(directory + "/ckpt")
    else:
        checkpoint.restore(tf.train.latest_checkpoint(directory)).assert_consumed()
        batches = [summary(batch) for batch in dataset]
    print(json.dumps({"batches": batches}))
    """
)


def _files(tmp_path) -> list[str]:
    paths = []
    rng = np.random.default_rng(5)
    for shard in range(2):
        path = str(tmp_path / f"part-{shard}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(7):
                image = rng.integers(0, 255, (12, 16, 3), np.uint8)
                example = build_example(
                    image, boxes=[[0.1, 0.2, 0.7, 0.9]], classes=[1], source_id=f"{shard}-{i}"
                )
                if i == 3:  # a bad record: skipped under on_error="skip"
                    example.features.feature["image/object/class/label"].int64_list.value[0] = 0
                writer.write(example.SerializeToString())
        paths.append(path)
    return paths


def _run(script, *args) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": os.getcwd()}
    result = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


# Saved in the first pass, and in the second (its file and record shuffles drawn anew).
@pytest.mark.slow
@pytest.mark.parametrize("steps", [3, 6])
def test_restore_in_a_fresh_process_continues_exactly(tmp_path, steps):
    files = _files(tmp_path)
    namespace: dict = {}
    exec(PIPELINE, namespace)  # the same pipeline, uninterrupted, in this process
    dataset = namespace["make"](files, "skip")
    whole = [namespace["summary"](batch) for batch in dataset]
    assert len(whole) == 8  # 2 epochs of 12 good records, batches of 3
    directory = str(tmp_path / "ckpt")
    first = _run(WORKER, ",".join(files), "skip", "save", directory, str(steps))
    rest = _run(WORKER, ",".join(files), "skip", "restore", directory, "0")
    assert first["batches"] + rest["batches"] == json.loads(json.dumps(whole))
    # The checkpoint holds the place, not the buffers: a few integers.
    assert sum(path.stat().st_size for path in (tmp_path / "ckpt").iterdir()) < 2048


# --- Keras BackupAndRestore: a resumed fit reads the data an uninterrupted fit reads ------------

FIT = PIPELINE + textwrap.dedent(
    """
    import hashlib, os
    import keras

    files, backup, log, crash_at = sys.argv[1:5]
    dataset = oi.make_dataset(
        files.split(","), batch_size=3, seed=11, shuffle_buffer_size=5,
        augment=[("random_horizontal_flip", {}), ("random_crop_image", {}),
                 ("random_adjust_brightness", {})],
        image_size=(8, 8), keras=True, reading={"num_readers": 2}, on_error="skip",
    )
    epoch = [None]

    class Recorder(keras.Model):
        # Runs eagerly: each batch the model trains on is hashed, with the epoch it came in.
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1)

        def call(self, images):
            return self.dense(tf.reshape(tf.cast(images, tf.float32), [-1, 8 * 8 * 3]))

        def train_step(self, data):
            images, targets = data
            digest = hashlib.sha1(images.numpy().tobytes() + targets["boxes"].numpy().tobytes())
            with open(log, "a") as f:
                f.write(json.dumps([epoch[0], digest.hexdigest()]) + "\\n")
            return super().train_step((images, tf.reduce_sum(targets["boxes"], [1, 2])[:, None]))

    class Crash(keras.callbacks.Callback):
        def on_epoch_begin(self, number, logs=None):
            epoch[0] = number

        def on_train_batch_end(self, batch, logs=None):
            if [epoch[0], batch] == json.loads(crash_at):
                os._exit(17)  # a crash: no cleanup, no exception handling

    model = Recorder()
    model(tf.zeros([1, 8, 8, 3]))  # BackupAndRestore needs a built model
    model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    model.fit(dataset, epochs=4, verbose=0, callbacks=[
        keras.callbacks.BackupAndRestore(backup), oi.SyncEpochs(dataset), Crash()])
    """
)


def _fit(files, backup, log, crash_at=None) -> tuple[int, list, str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": os.getcwd()}
    args = [",".join(files), str(backup), str(log), json.dumps(crash_at)]
    result = subprocess.run(
        [sys.executable, "-c", FIT, *args], capture_output=True, text=True, env=env, check=False
    )
    batches = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return result.returncode, batches, result.stderr[-3000:]


def _by_epoch(batches) -> dict[int, list[str]]:
    epochs: dict[int, list[str]] = {}
    for epoch, digest in batches:
        epochs.setdefault(epoch, []).append(digest)
    return epochs


@pytest.mark.slow
def test_keras_backup_and_restore_resumes_with_the_same_data(tmp_path):
    files = _files(tmp_path)
    code, whole, stderr = _fit(files, tmp_path / "backup-whole", tmp_path / "whole.jsonl")
    assert code == 0, stderr
    whole = _by_epoch(whole)
    assert sorted(whole) == [0, 1, 2, 3] and all(len(b) == 4 for b in whole.values())
    # Each epoch reads new data (shuffle and augmentation both change).
    assert len({tuple(b) for b in whole.values()}) == 4

    backup, log = tmp_path / "backup", tmp_path / "run.jsonl"
    code, crashed, stderr = _fit(files, backup, log, crash_at=[2, 1])
    assert code == 17, stderr
    crashed = _by_epoch(crashed)
    assert crashed == {0: whole[0], 1: whole[1], 2: whole[2][:2]}
    # A fresh process restores the weights and starts again at epoch 2 (its start, as Keras
    # does): it reads epochs 2 and 3 exactly as the uninterrupted run did.
    log.unlink()
    code, resumed, stderr = _fit(files, backup, log)
    assert code == 0, stderr
    assert _by_epoch(resumed) == {2: whole[2], 3: whole[3]}


# --- Iteration numbers: what keys each iterator's randomness ---------------------------------

ITERATION = PIPELINE + textwrap.dedent(
    """
    from object_input import iterations

    files, number, parallel = sys.argv[1:4]
    dataset = oi.make_dataset(
        files.split(","), batch_size=3, seed=11, shuffle_buffer_size=5, num_epochs=2,
        augment=[("random_horizontal_flip", {}), ("random_crop_image", {}),
                 ("random_adjust_brightness", {})],
        image_size=(8, 8), on_error="skip", reading={"num_readers": 2},
        num_parallel_calls=int(parallel), deterministic=True,
    )
    iterations.progress_of(dataset).set(int(number))
    print(json.dumps({"batches": [summary(batch) for batch in dataset]}))
    """
)


def _iterations(files):
    namespace: dict = {}
    exec(PIPELINE, namespace)
    dataset = namespace["make"](files, "skip")
    return dataset, lambda: json.loads(json.dumps([namespace["summary"](b) for b in dataset]))


@pytest.mark.slow
def test_iteration_k_is_the_same_in_a_fresh_process_whatever_the_parallelism(tmp_path):
    files = _files(tmp_path)
    dataset, read = _iterations(files)
    streams = [read() for _ in range(4)]
    assert oi.iterations.progress_of(dataset).state().numpy().tolist() == [4, 0, 0]
    # Another process, one thread per map instead of AUTOTUNE, told to read iteration 3.
    fresh = _run(ITERATION, ",".join(files), "3", "1")
    assert fresh["batches"] == streams[3]


@pytest.mark.slow
def test_iterations_differ_and_each_is_reproducible(tmp_path):
    files = _files(tmp_path)
    dataset, read = _iterations(files)
    first, second = read(), read()
    ids = [[sid for batch in stream for sid in batch[0]] for stream in (first, second)]
    assert sorted(ids[0]) == sorted(ids[1]) and ids[0] != ids[1]  # reshuffled, all records
    assert [b[1] for b in first] != [b[1] for b in second]  # augmented anew
    counter = oi.iterations.progress_of(dataset)
    counter.set(1)
    assert read() == second
    counter.set(0)
    assert read() == first
    # A new dataset in this process starts again at iteration 0.
    assert _iterations(files)[1]() == first


@pytest.mark.slow
def test_the_counter_checkpoints_and_continues_the_numbering(tmp_path):
    files = _files(tmp_path)
    dataset, read = _iterations(files)
    streams = [read() for _ in range(3)]
    dataset, read = _iterations(files)
    checkpoint = tf.train.Checkpoint(iterations=oi.iterations.progress_of(dataset))
    read(), read()
    path = checkpoint.save(str(tmp_path / "ckpt"))
    restored, read_restored = _iterations(files)
    tf.train.Checkpoint(iterations=oi.iterations.progress_of(restored)).restore(path)
    assert read_restored() == streams[2]


def _fit_steps(dataset, callbacks, **fit) -> list:
    """The boxes of each batch ``fit`` trains on, over three steps an epoch."""
    import keras

    seen = []

    class Recorder(keras.Model):
        def call(self, images):
            return tf.reduce_mean(tf.cast(images, tf.float32), [1, 2])

        def train_step(self, data):
            seen.append(data[1]["boxes"].numpy())
            return {"loss": tf.constant(0.0)}

    model = Recorder()
    model.compile(run_eagerly=True)
    model.fit(dataset, steps_per_epoch=3, verbose=0, callbacks=callbacks, **fit)
    return seen


STEPS_OPTIONS = {"batch_size": 3, "seed": 2, "num_epochs": None, "on_error": "skip", "keras": True}


@pytest.mark.slow
def test_fit_with_steps_per_epoch_reads_the_initial_epochs_iteration(tmp_path):
    """One iterator serves every epoch: without a backup_dir it reads iteration
    ``initial_epoch`` from its start (what a resumed run then gets, as documented)."""
    files = _files(tmp_path)
    dataset = oi.make_dataset(files, image_size=(8, 8), **STEPS_OPTIONS)
    seen = _fit_steps(dataset, [oi.SyncEpochs(dataset)], epochs=3, initial_epoch=1)
    expected = oi.make_dataset(files, image_size=(8, 8), **STEPS_OPTIONS)
    oi.iterations.progress_of(expected).set(1)
    batches = [targets["boxes"].numpy() for _, targets in expected.take(6)]
    assert len(seen) == 6
    for got, want in zip(seen, batches, strict=True):
        np.testing.assert_array_equal(got, want)


def test_fit_with_steps_per_epoch_continues_the_stream_from_the_backup(tmp_path):
    files = _files(tmp_path)
    whole_dataset = oi.make_dataset(files, image_size=(8, 8), **STEPS_OPTIONS)
    whole = _fit_steps(whole_dataset, [oi.SyncEpochs(whole_dataset)], epochs=3)
    backup = str(tmp_path / "backup")
    first = oi.make_dataset(files, image_size=(8, 8), **STEPS_OPTIONS)
    for got, want in zip(
        _fit_steps(first, [oi.SyncEpochs(first, backup)], epochs=2), whole[:6], strict=True
    ):
        np.testing.assert_array_equal(got, want)
    # A new process's dataset, resumed at epoch 2: the rest of the one iterator's stream.
    resumed = oi.make_dataset(files, image_size=(8, 8), **STEPS_OPTIONS)
    rest = _fit_steps(resumed, [oi.SyncEpochs(resumed, backup)], epochs=3, initial_epoch=2)
    assert len(rest) == 3
    for got, want in zip(rest, whole[6:], strict=True):
        np.testing.assert_array_equal(got, want)


def test_counter_errors():
    dataset = oi.make_dataset(
        tf.data.Dataset.from_tensors({"image": tf.zeros([2, 2, 3], tf.uint8)})
    )
    counter = oi.iterations.progress_of(dataset)
    with pytest.raises(ValueError, match="an iteration number is an integer >= 0, got -1"):
        counter.set(-1)
    with pytest.raises(ValueError, match="no progress on this dataset"):
        oi.SyncEpochs(dataset.take(1))


@pytest.mark.slow
def test_the_global_seed_does_not_change_the_data(tmp_path):
    files = _files(tmp_path)
    expected = _iterations(files)[1]()
    try:
        for global_seed in (0, 5):  # 0 once made TensorFlow test the iteration seed as a bool
            tf.random.set_seed(global_seed)
            assert _iterations(files)[1]() == expected
    finally:
        tf.random.set_seed(None)
