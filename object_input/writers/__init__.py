"""Writers: build detection ``tf.train.Example`` records from numpy and write TFRecord shards;
write CIFAR binaries.

Shards (:class:`ShardedWriter`, :func:`write_tfrecords`, :func:`write_parallel`) are written
under temporary names and get their names ``prefix-00000-of-0000N.tfrecord`` only when the
writing succeeds: a failed write leaves none. They replace the dataset under ``prefix``: the
shards of another count or compression there are removed once the new ones are in place.
"""

from object_input.writers.cifar import write_cifar10, write_cifar100
from object_input.writers.parallel import write_parallel
from object_input.writers.tf_example import (
    ShardedWriter,
    StagedShards,
    build_example,
    describe_replaced,
    encode_image,
    other_shards,
    shard_paths,
    write_tfrecords,
)

__all__ = [
    "ShardedWriter",
    "StagedShards",
    "build_example",
    "describe_replaced",
    "encode_image",
    "other_shards",
    "shard_paths",
    "write_cifar10",
    "write_cifar100",
    "write_parallel",
    "write_tfrecords",
]
