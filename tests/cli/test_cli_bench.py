"""``object-input bench``: images/s and CPU ms per image, with and without a config."""

import re

from object_input import cli


def test_bench_prints_images_per_second_and_cpu_time(synthetic_dir, tmp_path, capsys):
    argv = ["bench", str(synthetic_dir), "--steps", "3", "--warmup", "1", "--batch-size", "4"]
    assert cli.main([*argv, "--image-size", "32", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(
        r"[\d.]+ images/s, [\d.]+ CPU ms per image \(12 images in 3 batches of 4, [\d.]+ s "
        r"after 1 warm-up batch; \d+ CPUs?\)\n",
        out,
    ), out
    config = tmp_path / "aug.yaml"
    config.write_text(
        f"input_paths: [{synthetic_dir}/*.tfrecord]\nbatch_size: 2\n"
        "augment:\n  - random_horizontal_flip: {}\n"
    )
    assert cli.main(["bench", "--config", str(config), "--steps", "2", "--no-progress"]) == 0
    assert "(4 images in 2 batches of 2" in capsys.readouterr().out
    assert cli.main([*argv, "--image-size", "1", "2", "3"]) == 1
    assert capsys.readouterr().err == (
        "object-input bench: error: --image-size takes SIZE or HEIGHT WIDTH, got 1 2 3\n"
    )
