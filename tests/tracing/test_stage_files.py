"""stage_files: stage functions kept on disk, read back by a later build or process."""

import logging
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from stage_helpers import arrays, assert_same, options, write

import object_input as oi
from object_input import fields
from object_input.tracing import maps, stage_files, stages, trace_cache


def _files():
    folder = stage_files.directory()
    return sorted(name for name in os.listdir(folder) if name.endswith(".stage"))


def _forget_in_memory():
    """What a fresh process has: nothing kept in memory, the files on disk."""
    stages.clear()
    trace_cache.clear()


class _Reads:
    """Counts the stage functions read from disk and traced while it is entered."""

    def __init__(self, monkeypatch):
        self.read = self.traced = 0
        load, traced = stage_files.load, stages.traced

        def counted_load(digest):
            found = load(digest)
            self.read += found is not None
            return found

        def counted_traced(*args, **kwargs):
            self.traced += 1
            return traced(*args, **kwargs)

        monkeypatch.setattr(stage_files, "load", counted_load)
        monkeypatch.setattr(stages, "traced", counted_traced)


def test_a_pipeline_built_in_a_fresh_state_reads_its_stages_from_disk(tmp_path, monkeypatch):
    source = write(tmp_path / "data")
    first = oi.make_dataset(source, **options())
    batches = arrays(first)
    written = _files()
    assert len(written) >= 10  # every stage of the pipeline
    _forget_in_memory()
    reads = _Reads(monkeypatch)
    again = oi.make_dataset(source, **options())
    assert reads.traced == 0 and reads.read == len(written)
    assert again.element_spec == first.element_spec
    assert list(again.element_spec) == list(first.element_spec)
    assert_same(batches, arrays(again))
    # Read once, then kept in memory: the next build reads nothing.
    arrays(oi.make_dataset(source, **options()))
    assert reads.read == len(written)


def test_a_changed_parameter_is_never_read_from_another_parameters_file(tmp_path, monkeypatch):
    source = write(tmp_path / "data")
    plain = arrays(oi.make_dataset(source, **options(augment=[_gain(1.0)], batch_size=None)))
    _forget_in_memory()
    reads = _Reads(monkeypatch)
    halved = arrays(oi.make_dataset(source, **options(augment=[_gain(0.5)], batch_size=None)))
    assert reads.traced >= 1  # the per-example function, and only what depends on the step
    assert reads.read >= 1  # the stages before it: the same as the first pipeline's
    for a, b in zip(plain, halved, strict=True):
        np.testing.assert_allclose(a[fields.IMAGE] * 0.5, b[fields.IMAGE], rtol=1e-6)


def test_a_changed_tunable_parameter_is_read_from_the_same_files(tmp_path, monkeypatch):
    source = write(tmp_path / "data")
    flip = [("random_horizontal_flip", {"probability": 1.0})]
    flipped = arrays(oi.make_dataset(source, **options(augment=flip, batch_size=None)))
    _forget_in_memory()
    reads = _Reads(monkeypatch)
    unflip = [("random_horizontal_flip", {"probability": 0.0})]
    unflipped = arrays(oi.make_dataset(source, **options(augment=unflip, batch_size=None)))
    assert reads.traced == 0 and reads.read >= 1  # fed the new build's probability
    for a, b in zip(flipped, unflipped, strict=True):
        np.testing.assert_array_equal(a[fields.IMAGE][:, ::-1], b[fields.IMAGE])


def _gain(gain):
    return ("adjust_gamma", {"gain": gain})


def test_another_source_or_option_gets_other_files(tmp_path):
    one, other = write(tmp_path / "one"), write(tmp_path / "other", count=4)
    oi.make_dataset(one, **options())
    written = set(_files())
    _forget_in_memory()
    oi.make_dataset(other, **options())
    assert set(_files()) - written  # the file lists differ: new stages
    _forget_in_memory()
    before = set(_files())
    oi.make_dataset(one, **options(max_boxes=5))
    assert set(_files()) - before


def test_the_key_on_disk_changes_with_the_installed_code(monkeypatch):
    def durable(*parts):
        return trace_cache.durable_digest(trace_cache.trace_key(parts))

    key = trace_cache.trace_key((trace_cache.clear, 1.5, "a"))
    digest = trace_cache.durable_digest(key)
    assert digest == durable(trace_cache.clear, 1.5, "a")
    assert digest != durable(trace_cache.clear, 1.5) != durable(trace_cache.clear, 1.5, "b")
    monkeypatch.setattr(trace_cache, "_installed", lambda: b"another version of the sources")
    assert trace_cache.durable_digest(key) != digest


def _user_step(x):
    return x


_user_step.__module__ = "object_input.tests"  # keyed in memory as the package's own


def test_code_from_outside_the_installed_packages_has_no_key_on_disk():
    # A notebook's or a test's function: another process may define it otherwise.
    assert trace_cache.trace_key(_user_step) is not None
    assert trace_cache.durable_digest(trace_cache.trace_key(_user_step)) is None
    local = type("Local", (), {})
    assert trace_cache.durable_digest((local,)) is None
    # A function of the package, a class of TensorFlow's: named by where they are defined.
    assert trace_cache.durable_digest(trace_cache.trace_key(stage_files.directory))
    assert trace_cache.durable_digest((tf.TensorSpec, tf.TensorSpec([2], tf.int64)))


def test_closures_of_one_code_are_told_apart_on_disk_by_what_they_hold():
    # Two closures the package made with one code: keyed by what they hold, never by the name
    # of their code alone (where what they hold has no key, they have no key on disk).
    one, other = trace_cache.reused(trace_cache.clear), trace_cache.reused(stages.clear)
    durable_one = trace_cache.durable_digest(trace_cache.trace_key(one))
    assert durable_one and durable_one != trace_cache.durable_digest(trace_cache.trace_key(other))
    assert trace_cache.durable_digest((trace_cache._Identity(one),)) is None


def test_two_lambdas_on_one_line_are_told_apart():
    first, second = (lambda x: x + 1), (lambda x: x + 2)
    assert trace_cache._code_digest(first.__code__) != trace_cache._code_digest(second.__code__)


def test_a_stage_of_code_from_elsewhere_is_kept_in_memory_only():
    def fn(x):
        return x + 1

    fn.__module__ = "object_input.tests"  # keyed as the package's own, but defined here
    mapped = maps.map_on_cpu(tf.data.Dataset.range(3), fn)
    assert [int(x) for x in mapped] == [1, 2, 3]
    assert len(stages._kept) == 1 and _files() == []


def test_an_unreadable_file_is_traced_again_and_written_anew(tmp_path, monkeypatch, caplog):
    source = write(tmp_path / "data")
    batches = arrays(oi.make_dataset(source, **options()))
    folder = stage_files.directory()
    for name in _files():
        with open(os.path.join(folder, name), "r+b") as file:
            file.truncate(40)  # a header cut short
    _forget_in_memory()
    reads = _Reads(monkeypatch)
    with caplog.at_level(logging.WARNING, logger=stage_files.__name__):
        again = arrays(oi.make_dataset(source, **options()))
    assert reads.read == 0 and reads.traced > 0
    assert "ignoring the unreadable kept stage function" in caplog.text
    assert_same(batches, again)
    _forget_in_memory()
    reads.read = 0
    arrays(oi.make_dataset(source, **options()))
    assert reads.read == len(_files())


def test_a_file_of_another_format_is_not_read(tmp_path, monkeypatch):
    source = write(tmp_path / "data")
    oi.make_dataset(source, **options())
    monkeypatch.setattr(stage_files, "FORMAT", stage_files.FORMAT + 1)
    _forget_in_memory()
    reads = _Reads(monkeypatch)
    oi.make_dataset(source, **options())
    assert reads.read == 0


def test_off_keeps_nothing_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv(stage_files.CACHE_ENV, "off")
    assert stage_files.directory() is None
    source = write(tmp_path / "data")
    oi.make_dataset(source, **options())
    monkeypatch.setenv(stage_files.CACHE_ENV, str(tmp_path / "cache"))
    assert not (tmp_path / "cache").exists()


def test_the_default_folder_is_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(stage_files.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert stage_files.directory() == os.path.join(tmp_path, "object_input", "stages")


def test_the_least_recently_used_files_go_beyond_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(stage_files, "MAX_FILES", 3)
    oi.make_dataset(write(tmp_path / "data"), **options())
    assert len(_files()) == 3
    folder = stage_files.directory()
    by_use = [*_files(), "d.stage", "e.stage"]
    for used, name in enumerate(by_use):
        path = os.path.join(folder, name)
        open(path, "ab").close()
        os.utime(path, (used, used))  # the order of their last use
    stage_files._prune(folder)
    assert _files() == sorted(by_use[-3:])


def test_a_stage_kept_in_memory_computes_no_digest(tmp_path, monkeypatch):
    source = write(tmp_path / "data")
    oi.make_dataset(source, **options())
    digests = []
    durable = trace_cache.durable_digest
    monkeypatch.setattr(
        trace_cache, "durable_digest", lambda key: digests.append(key) or durable(key)
    )
    assert_same(
        arrays(oi.make_dataset(source, **options())), arrays(oi.make_dataset(source, **options()))
    )
    assert digests == []


def test_a_dataset_of_read_stages_can_be_made_into_a_function(tmp_path):
    source = write(tmp_path / "data")
    oi.make_dataset(source, **options())
    _forget_in_memory()
    dataset = oi.make_dataset(source, **options())
    # What tf.distribute does with a dataset: a function that makes its variant, holding the
    # definitions of the functions its stages call.
    function = dataset._trace_variant_creation()
    names = {f.signature.name for f in function.graph.as_graph_def().library.function}
    read = [kept.wrapper.function.name.decode() for kept in stages._kept.values()]
    assert read and set(read) <= names


def test_functions_read_twice_share_their_definitions(tmp_path):
    source = write(tmp_path / "data")
    batches = arrays(oi.make_dataset(source, **options()))
    _forget_in_memory()
    first = oi.make_dataset(source, **options())
    _forget_in_memory()
    second = oi.make_dataset(source, **options())  # the same names, registered already
    del first
    assert_same(batches, arrays(second))


_PROCESS = textwrap.dedent(
    """
    import hashlib, sys
    import tensorflow as tf
    import object_input as oi
    from object_input.tracing import stage_files, stages

    read = []
    load = stage_files.load
    stage_files.load = lambda digest: read.append(load(digest) is not None) or load(digest)
    dataset = oi.make_dataset(
        sys.argv[1], batch_size=2, shuffle=False, seed=3,
        augment=[("random_horizontal_flip", {"probability": 0.5}), "random_adjust_brightness"],
    )
    digest = hashlib.sha256()
    for batch in dataset:
        for name in batch:
            digest.update(name.encode() + tf.io.serialize_tensor(batch[name]).numpy())
    print(sum(read), len(read), digest.hexdigest())
    """
)


@pytest.mark.slow
def test_a_fresh_process_reads_what_an_earlier_one_wrote(tmp_path):
    source = write(tmp_path / "data")
    env = {**os.environ, stage_files.CACHE_ENV: str(tmp_path / "cache")}

    def run():
        command = [sys.executable, "-c", _PROCESS, source]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        read, stages_built, digest = done.stdout.split()
        return int(read), int(stages_built), digest

    first, second = run(), run()
    assert first[0] == 0 and first[1] >= 10
    assert second[0] == second[1] == first[1]  # every stage read from disk
    assert second[2] == first[2]  # bit-identical batches
    files = os.listdir(tmp_path / "cache")
    assert len(files) == first[1] and not [f for f in files if f.endswith(".tmp")]


def test_a_folder_that_cannot_be_written_is_warned_about_once(tmp_path, monkeypatch, caplog):
    (tmp_path / "a file").write_text("not a folder")
    monkeypatch.setenv(stage_files.CACHE_ENV, str(tmp_path / "a file" / "stages"))
    source = write(tmp_path / "data")
    with caplog.at_level(logging.WARNING, logger=stage_files.__name__):
        batches = arrays(oi.make_dataset(source, **options()))
    assert caplog.text.count("could not keep stage functions in") == 1
    assert len(batches) == 3
