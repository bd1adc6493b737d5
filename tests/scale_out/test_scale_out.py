"""tf.data service and tf.distribute integration."""

import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields


@pytest.fixture(scope="module")
def service():
    dispatcher = tf.data.experimental.service.DispatchServer()
    address = dispatcher.target.split("://")[1]
    workers = [
        tf.data.experimental.service.WorkerServer(
            tf.data.experimental.service.WorkerConfig(dispatcher_address=address)
        )
        for _ in range(2)
    ]
    yield dispatcher.target
    for worker in workers:
        worker.stop()
    dispatcher.stop()


def _ids(dataset):
    return [sid for batch in dataset for sid in batch[fields.SOURCE_ID].numpy().tolist()]


@pytest.mark.slow
def test_distributed_epoch_delivers_every_example_exactly_once(synthetic_dir, service):
    ds = oi.make_dataset(
        synthetic_dir,
        batch_size=4,
        seed=3,
        augment=["random_horizontal_flip"],
        service=oi.ServiceOptions(service, mode="distributed_epoch"),
        num_epochs=2,
    )
    ids = _ids(ds)
    assert len(ids) == 48
    assert {sid: ids.count(sid) for sid in set(ids)} == {str(i).encode(): 2 for i in range(24)}


@pytest.mark.slow
def test_parallel_epochs_each_worker_produces_whole_epochs(synthetic_dir, service):
    ds = oi.make_dataset(
        synthetic_dir,
        batch_size=4,
        seed=3,
        service=oi.ServiceOptions(service, mode="parallel_epochs"),
        num_epochs=1,
    )
    ids = _ids(ds)
    assert sorted(ids) == sorted([str(i).encode() for i in range(24)] * 2)


def test_unknown_service_mode_is_rejected(synthetic_dir):
    with pytest.raises(ValueError, match="service mode"):
        oi.make_dataset(
            synthetic_dir, batch_size=2, service={"address": "grpc://localhost:1", "mode": "x"}
        )


def test_dataset_fn_refuses_batch_size():
    with pytest.raises(ValueError, match="sets batch_size"):
        oi.dataset_fn("x", global_batch_size=8, batch_size=4)


@pytest.mark.slow
def test_mirrored_strategy_two_logical_cpus(synthetic_dir):
    # Logical devices must be configured before TensorFlow initializes: use a fresh process.
    script = textwrap.dedent(
        f"""
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import object_input as oi
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        fn = oi.dataset_fn({str(synthetic_dir)!r}, global_batch_size=8, image_size=(32, 32),
                           max_boxes=6, batching="static", seed=0, drop_remainder=True)
        dist = strategy.distribute_datasets_from_function(fn)
        seen = []
        for batch in dist:
            parts = strategy.experimental_local_results(batch)
            assert len(parts) == 2, len(parts)
            for part in parts:
                assert tuple(part["image"].shape) == (4, 32, 32, 3), part["image"].shape
                seen += part["source_id"].numpy().tolist()
        assert len(seen) == 24 and len(set(seen)) == 24, seen
        print("OK", len(seen))
        """
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK 24" in result.stdout
