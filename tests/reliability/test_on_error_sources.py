"""Every registered source, through its sample(), raises or skips its damaged record alone."""

import pytest
import tensorflow as tf
from source_samples import SAMPLED, SOURCES, WITHOUT_SAMPLE, declares_sample, record_ids, sample

import object_input as oi
from object_input.reliability.skips import stats
from object_input.sources import _samples as samples


def test_every_registered_source_declares_a_sample_next_to_itself():
    missing = sorted(n for n, c in SOURCES.items() if not declares_sample(c))
    assert missing == sorted(WITHOUT_SAMPLE), "declare Source.sample in the source's module"


#: The sources the short loop (-m "not slow") runs through the suite, one binary and one text
#: format; the others take 2 to 4 CPU s each (Earth Engine about 15) and run in the full suite.
IN_THE_LOOP = {"TFRecord", "CSV"}


@pytest.mark.parametrize(
    "name",
    [n if n in IN_THE_LOOP else pytest.param(n, marks=pytest.mark.slow) for n in SAMPLED],
)
def test_every_source_raises_or_skips_its_damaged_record_alone(tmp_path, name):
    options = {"batch_size": None, "shuffle": False}
    good = sample(name, tmp_path / "good")
    examples = list(oi.make_dataset(good, **options))
    assert len(examples) == len(record_ids(good)) == samples.RECORDS
    bad = sample(name, tmp_path / "bad", samples.CERTAIN)
    if bad is None:
        return  # refused when made, naming the file: a format without record-level failures
    ids = record_ids(bad)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        list(oi.make_dataset(bad, on_error="raise", **options))
    assert any(record_id in str(raised.value) for record_id in ids), str(raised.value)
    dataset = oi.make_dataset(bad, on_error="skip", **options)
    kept = list(dataset)
    summary = stats(dataset)
    assert summary.passed == len(kept) == samples.RECORDS - 1
    assert summary.total_skipped == 1
    assert summary.offenders[0].startswith(ids), summary.offenders
