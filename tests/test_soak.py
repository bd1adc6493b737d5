"""A short soak (benchmarks/soak.py): RSS stays flat while skipping bad records all along."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "benchmarks"))

import soak


def test_short_soak_keeps_rss_flat_and_counts_the_skips(tmp_path):
    result = soak.soak(soak.write_records(str(tmp_path), num_examples=128), 640, every=4)
    assert result["examples"] >= 640
    assert abs(result["drift_fraction"]) < 0.05, result["samples"]
    stats = result["stats"]
    # 2 of every 128 records are bad: about 1 skip per 64 records read.
    assert set(stats.skipped) == {"class_range"} and stats.skipped["class_range"] >= 640 // 64
    assert stats.offenders[0].startswith(str(tmp_path))
