"""The on_error policy itself: validated, checked at build time, its old words deprecated,
its counts reported by the CLI and by SkipLogger."""

import logging
import re

import pytest
from bad_records import (
    bad_record,
    good_example,
    records_with_bad,
    small_dataset,
    source_ids,
    write_records,
)

import object_input as oi
from object_input.reliability.skips import stats


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_unknown_step_or_bad_parameter_fails_at_build_time(tmp_path, on_error):
    path = write_records(tmp_path / "s.tfrecord", [good_example(0).SerializeToString()])
    with pytest.raises(ValueError, match="unknown"):
        small_dataset(path, on_error=on_error, augment=[("random_flip_sideways", {})])
    with pytest.raises(ValueError, match="probability"):
        small_dataset(
            path, on_error=on_error, augment=[("random_horizontal_flip", {"probability": 2})]
        )


def test_on_error_is_validated(tmp_path):
    path = write_records(tmp_path / "s.tfrecord", [good_example(0).SerializeToString()])
    with pytest.raises(ValueError, match="on_error must be one of"):
        small_dataset(path, on_error="ignore")
    # "mark" is for readers (ReadContext), not a pipeline policy.
    with pytest.raises(ValueError, match=r"on_error must be one of \('raise', 'skip'\)"):
        small_dataset(path, on_error="mark")
    with pytest.raises(ValueError, match="no counts on this dataset"):
        stats(small_dataset(path).take(1))


@pytest.mark.slow
def test_cli_bench_prints_the_skip_summary(tmp_path, capsys):
    from object_input import cli

    bad = bad_record(image__object__class__label=0)
    path = write_records(tmp_path / "c.tfrecord", records_with_bad(bad, count=3, at=2))
    # One batch of 4 takes the whole first epoch (the shuffle comes before the repeat), so the
    # bad record is always in it, whatever the unseeded shuffle order.
    argv = ["bench", path, "--steps", "1", "--warmup", "0", "--batch-size", "4", "--no-progress"]
    assert cli.main([*argv, "--on-error", "skip"]) == 0
    out = capsys.readouterr().out
    # bench repeats the data and prefetches ahead, so how many epochs' copies of the bad record
    # were counted when the summary is read depends on timing: at least one.
    assert re.search(r"\d+ records used, [1-9]\d* skipped", out) and "class_range" in out
    assert f"skipped {path}:2: class_range" in out
    assert cli.main(argv) == 1
    assert f"record {path}:2 (source_id bad)" in capsys.readouterr().err


def test_skip_logger_logs_new_offenders_and_reports_the_count(tmp_path, caplog):
    bad = bad_record(image__object__bbox__ymin=0.9)
    path = write_records(tmp_path / "l.tfrecord", records_with_bad(bad, count=2, at=0))
    dataset = small_dataset(path, on_error="skip")
    callback = oi.SkipLogger(dataset)
    source_ids(dataset)
    logs: dict = {}
    with caplog.at_level(logging.WARNING, logger="object_input"):
        callback.on_epoch_end(0, logs)
        callback.on_epoch_end(1, logs)
    assert logs == {"skipped": 1}
    assert caplog.text.count(f"skipped record {path}:0: box_order") == 1
