"""Writers: build detection ``tf.train.Example`` records from numpy and write TFRecord shards;
write CIFAR binaries."""

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
    shard_suffix,
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
    "shard_suffix",
    "write_cifar10",
    "write_cifar100",
    "write_parallel",
    "write_tfrecords",
]
