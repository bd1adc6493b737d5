"""Exact resume: batches before a checkpoint plus batches after a restore in a fresh process equal
an uninterrupted run with the same seed (record and file shuffle, augmentation, skips)."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
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
    iterator = iter(dataset)
    checkpoint = tf.train.Checkpoint(iterator=iterator, counts=oi.skips.counter_of(dataset))
    if mode == "save":
        batches = [summary(next(iterator)) for _ in range(int(steps))]
        checkpoint.save(directory + "/ckpt")
    else:
        checkpoint.restore(tf.train.latest_checkpoint(directory)).assert_consumed()
        batches = [summary(batch) for batch in iterator]
    stats = oi.stats(dataset)
    print(json.dumps({"batches": batches, "skipped": stats.skipped, "passed": stats.passed}))
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


def test_restore_in_a_fresh_process_continues_exactly(tmp_path):
    files = _files(tmp_path)
    namespace: dict = {}
    exec(PIPELINE, namespace)  # the same pipeline, uninterrupted, in this process
    dataset = namespace["make"](files, "skip")
    whole = [namespace["summary"](batch) for batch in dataset]
    assert len(whole) == 8  # 2 epochs of 12 good records, batches of 3
    directory = str(tmp_path / "ckpt")
    first = _run(WORKER, ",".join(files), "skip", "save", directory, "3")
    rest = _run(WORKER, ",".join(files), "skip", "restore", directory, "0")
    assert first["batches"] + rest["batches"] == json.loads(json.dumps(whole))
    # The counts resume with the iterator: the totals are the uninterrupted run's.
    assert rest["skipped"] == oi.stats(dataset).skipped == {"class_range": 4}
    assert rest["passed"] == oi.stats(dataset).passed == 24
