"""The array namespaces the batched pixel forms are written against.

Every batched ``apply`` of a device step, and the batched primitives they share
(:mod:`object_input.ops._batched`, :mod:`object_input.ops._policy_device`, the fused colour pass),
is written once against a namespace ``xp`` with TensorFlow's names and semantics (``xp.where``,
``xp.gather``, ``xp.clip_by_value``, ...). Two namespaces implement it:

- :data:`TENSORFLOW`: the TensorFlow ops themselves. ``tf.data`` on the host and Keras's
  TensorFlow backend use it, so the batched forms there are the very graphs they were before
  (bit for bit), with GPU kernels and XLA.
- :func:`keras_ops`: the same names over ``keras.ops``, for a Keras model on any other backend
  (JAX, PyTorch): the backend compiles it (``jax.jit`` under JAX).

Keras is imported only by :func:`keras_ops`: the pipeline needs TensorFlow alone. Only what the
forms use is here; the few ops with no ``keras.ops`` equivalent of the same meaning (the batched
gather of the equalize lookup, logical shifts) are spelled out in both.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import numpy as np
import tensorflow as tf


class Namespace(types.SimpleNamespace):
    """An array namespace: functions by name. Hashable by identity, so a traced function
    (``tf.function``, ``jax.jit``) can take one as a static argument."""

    __eq__ = object.__eq__
    __hash__ = object.__hash__
    # Which namespace a trace ran on is all it depends on (object_input.tracing.trace_cache):
    # each is a constant of its module.
    _key_by_identity = True


def _tf_map_images(fn: Any, elems: Any, shape: Any) -> tf.Tensor:
    return tf.map_fn(fn, elems, fn_output_signature=tf.TensorSpec(shape, tf.float32))


def _tf_select(condition: tf.Tensor, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    # The plain select over equal shapes: several times faster than tf.where's broadcasting one.
    return tf.raw_ops.Select(condition=condition, x=x, y=y)


def _tf_take_last(values: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
    return tf.gather(values, index, batch_dims=values.shape.rank - 1)


#: TensorFlow's ops (what tf.data and Keras's TensorFlow backend run).
TENSORFLOW = Namespace(
    name="tensorflow",
    abs=tf.abs,
    bitwise_and=tf.bitwise.bitwise_and,
    bitwise_xor=tf.bitwise.bitwise_xor,
    broadcast_to=tf.broadcast_to,
    cast=tf.cast,
    ceil=tf.math.ceil,
    clip_by_value=tf.clip_by_value,
    concat=tf.concat,
    constant=tf.constant,
    cos=tf.cos,
    cumsum=tf.cumsum,
    exp=tf.exp,
    floor=tf.floor,
    gather=tf.gather,
    left_shift=tf.bitwise.left_shift,
    log=tf.math.log,
    map_images=_tf_map_images,
    maximum=tf.maximum,
    minimum=tf.minimum,
    ones=tf.ones,
    pad=tf.pad,
    range=tf.range,
    reduce_max=tf.reduce_max,
    reduce_mean=tf.reduce_mean,
    reduce_min=tf.reduce_min,
    reduce_sum=tf.reduce_sum,
    reshape=tf.reshape,
    reverse=tf.reverse,
    right_shift=tf.bitwise.right_shift,
    round=tf.round,
    select=_tf_select,
    shape=tf.shape,
    sign=tf.sign,
    sqrt=tf.sqrt,
    square=tf.square,
    stack=tf.stack,
    switch_case=tf.switch_case,
    take_last=_tf_take_last,
    tensordot=tf.tensordot,
    tile=tf.tile,
    to_float=lambda x: tf.cast(x, tf.float32) if x.dtype != tf.float32 else x,
    unsorted_segment_sum=tf.math.unsorted_segment_sum,
    unstack=tf.unstack,
    where=tf.where,
    zeros_like=tf.zeros_like,
)


@functools.cache
def keras_ops() -> Namespace:
    """:data:`TENSORFLOW`'s names over ``keras.ops``, for Keras's current backend."""
    import keras
    from keras import ops

    def cast(x: Any, dtype: Any) -> Any:
        return ops.cast(x, keras.backend.standardize_dtype(_dtype_name(dtype)))

    def range_(start: Any, limit: Any = None, dtype: Any = "int32") -> Any:
        if limit is None:
            start, limit = 0, start
        return ops.arange(start, limit, dtype=_dtype_name(dtype))

    def to_float(x: Any) -> Any:
        return x if keras.backend.standardize_dtype(x.dtype) == "float32" else cast(x, "float32")

    def where(condition: Any, x: Any, y: Any) -> Any:
        return ops.where(condition, x, y)

    def reduce(fn: Any) -> Any:
        def reduced(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
            axis = tuple(axis) if isinstance(axis, list | tuple) else axis
            return fn(x, axis=axis, keepdims=keepdims)

        return reduced

    def map_images(fn: Any, elems: Any, shape: Any) -> Any:
        del shape
        return ops.map(fn, elems)

    def switch_case(index: Any, branches: Any) -> Any:
        return ops.switch(index, branches)

    def take_last(values: Any, index: Any) -> Any:
        return ops.take_along_axis(values, index[..., None], axis=-1)[..., 0]

    def unsorted_segment_sum(data: Any, segment_ids: Any, num_segments: int) -> Any:
        return ops.segment_sum(data, segment_ids, num_segments=num_segments)

    def constant(value: Any, dtype: Any = None) -> Any:
        array = np.asarray(value) if dtype is None else np.asarray(value, _dtype_name(dtype))
        return ops.convert_to_tensor(array)

    def ones(shape: Any, dtype: Any = "float32") -> Any:
        return ops.ones(shape, dtype=_dtype_name(dtype))

    def tensordot(a: Any, b: Any, axes: Any) -> Any:
        return ops.tensordot(a, b, axes=axes)

    def pad(x: Any, paddings: Any, constant_values: float = 0) -> Any:
        # The fill concatenated, not ops.pad: that builds a named keras Operation on every call,
        # eager ones included, and under torch.compile the name counter is a guard that fails
        # each call, so the stage would recompile each batch.
        for axis, (before, after) in enumerate(paddings):
            if before or after:
                shape = list(ops.shape(x))
                head, tail = (
                    ops.full(
                        [*shape[:axis], width, *shape[axis + 1 :]], constant_values, dtype=x.dtype
                    )
                    for width in (before, after)
                )
                x = ops.concatenate([head, x, tail], axis=axis)
        return x

    return Namespace(
        name=keras.backend.backend(),
        abs=ops.abs,
        bitwise_and=ops.bitwise_and,
        bitwise_xor=ops.bitwise_xor,
        broadcast_to=ops.broadcast_to,
        cast=cast,
        ceil=ops.ceil,
        clip_by_value=ops.clip,
        concat=lambda values, axis: ops.concatenate(values, axis=axis),
        constant=constant,
        cos=ops.cos,
        cumsum=lambda x, axis: ops.cumsum(x, axis=axis),
        exp=ops.exp,
        floor=ops.floor,
        gather=lambda values, index: ops.take(values, index, axis=0),
        left_shift=ops.left_shift,
        log=ops.log,
        map_images=map_images,
        maximum=ops.maximum,
        minimum=ops.minimum,
        ones=ones,
        pad=pad,
        range=range_,
        reduce_max=reduce(ops.max),
        reduce_mean=reduce(ops.mean),
        reduce_min=reduce(ops.min),
        reduce_sum=reduce(ops.sum),
        reshape=ops.reshape,
        reverse=lambda x, axes: ops.flip(x, axis=tuple(axes)),
        right_shift=ops.right_shift,
        round=ops.round,
        select=lambda condition, x, y: ops.where(condition, x, y),
        shape=ops.shape,
        sign=ops.sign,
        sqrt=ops.sqrt,
        square=ops.square,
        stack=lambda values, axis=0: ops.stack(values, axis=axis),
        switch_case=switch_case,
        take_last=take_last,
        tensordot=tensordot,
        tile=ops.tile,
        to_float=to_float,
        unsorted_segment_sum=unsorted_segment_sum,
        unstack=lambda x, axis=0: ops.unstack(x, axis=axis),
        where=where,
        zeros_like=ops.zeros_like,
    )


def _dtype_name(dtype: Any) -> str:
    return tf.as_dtype(dtype).name if isinstance(dtype, tf.DType) else str(dtype)


def current() -> Namespace:
    """The namespace for Keras's current backend: :data:`TENSORFLOW` on TensorFlow."""
    import keras

    return TENSORFLOW if keras.backend.backend() == "tensorflow" else keras_ops()
