"""Shared fixtures: small generated datasets; nothing is downloaded."""

import gc
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Stage functions kept on disk (object_input.tracing.stage_files) go to a folder of this run's,
# emptied around each test, never the user's cache; the CLI's subprocesses inherit it.
os.environ["OBJECT_INPUT_CACHE"] = tempfile.mkdtemp(prefix="object-input-stages-")

import numpy as np
import pytest
from hypothesis import settings

settings.register_profile("default", deadline=None, max_examples=25)
# CI replays the same examples every run, so a red CI always names a reproducible case; local
# runs keep exploring new ones.
settings.register_profile("ci", deadline=None, max_examples=25, derandomize=True)
# The developer's loop (pytest -m "not slow") tries 10 examples where no test sets its own
# number: a property test builds a pipeline per example, and the loop must stay short. CI and
# the README's command pass no -m and keep 25.
settings.register_profile("dev", deadline=None, max_examples=10)
settings.load_profile("ci" if os.environ.get("CI") else "default")


def pytest_configure(config):
    if "not slow" in (config.option.markexpr or ""):
        settings.load_profile("dev")


def pytest_unconfigure(config):
    shutil.rmtree(os.environ["OBJECT_INPUT_CACHE"], ignore_errors=True)


def pytest_collection_finish(session):
    # TensorFlow, Keras and the collected tests are a few hundred thousand objects that live
    # as long as the run: frozen, the collector's full passes (each a quarter of a second by
    # the end of a worker's run) no longer walk them.
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def no_lost_worker_watch_left():
    """The lost-worker watches a test's service datasets started end with it: a later test's
    log would otherwise get their warning that the test's dispatcher no longer answers."""
    yield
    from object_input.scale_out import lost_workers

    lost_workers.stop_watches()


@pytest.fixture(autouse=True)
def fresh_trace_cache():
    """Each test starts with no traces or stage functions kept (object_input.tracing), in
    memory or on disk: a test that patches this package's code must not run on another test's
    traces. A test that builds a pipeline twice still runs the second build on what the first
    one kept."""
    from object_input.tracing import stage_files, stages, trace_cache

    for forget in (trace_cache.clear, stages.clear, stage_files.clear):
        forget()
    yield
    for forget in (trace_cache.clear, stages.clear, stage_files.clear):
        forget()


@pytest.fixture(scope="session")
def synthetic_dir(tmp_path_factory):
    """24 synthetic examples (three image sizes, 0-4 boxes, PNG masks) in 3 shards."""
    from object_input.writers.synthetic import write_synthetic_dataset

    directory = tmp_path_factory.mktemp("synthetic")
    write_synthetic_dataset(directory, num_examples=24, num_shards=3, seed=7)
    return directory


@pytest.fixture
def rng():
    return np.random.default_rng(0)
