"""``Dataset.map`` whose function TensorFlow instantiates on the CPU alone, without Grappler.

Every iterator instantiates each function of its dataset anew. For a function that may span
devices (what ``Dataset.map`` traces), that runs Grappler's whole-function rewrites each time:
about 0.1 ms per graph node, 0.3 of the 0.4 CPU seconds the standard pipeline's ``iter()`` took
(docs/performance.md, "Time to first batch"), for no measurable gain per image. A function
marked ``experimental_ints_on_device`` is instantiated as a function of one device instead, the
CPU where tf.data runs it, with TensorFlow's plain graph optimizations (common subexpressions,
constant folding) and no Grappler pass.

Only the maps of the pipeline's top level are marked (so are its filters, scans and
flat_maps, :mod:`~object_input.tracing.stages`), and only when their function captures nothing
placed off the CPU (a variable on a GPU); maps inside another dataset function (a
``flat_map``'s) stay as ``Dataset.map`` traces them, since tf.data's rewrites look inside those.
tf.data's ``experimental_slack`` rewrite fails on marked functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops
from tensorflow.python.ops import gen_dataset_ops

from object_input.tracing import stages


def map_on_cpu(
    dataset: tf.data.Dataset,
    fn: Callable[..., Any],
    num_parallel_calls: int | None = None,
    deterministic: bool | None = None,
) -> tf.data.Dataset:
    """``dataset.map(fn, num_parallel_calls, deterministic)``, its function instantiated on
    the CPU alone (module docstring) and kept for the next build
    (:mod:`~object_input.tracing.stages`); the same elements in the same order."""

    if tf.inside_function():
        return dataset.map(fn, num_parallel_calls=num_parallel_calls, deterministic=deterministic)

    def make(kept: stages.Kept, captured: list[Any]) -> tf.data.Dataset:
        one_device = _OneDeviceMap(dataset, kept, captured, num_parallel_calls, deterministic)
        return stages.on_cpu_options(one_device)

    def build() -> stages.Built:
        marked = stages.traced(fn, "Dataset.map()", dataset=dataset)
        if marked is None:  # traced again, unmarked
            plain = dataset.map(
                fn, num_parallel_calls=num_parallel_calls, deterministic=deterministic
            )
            return plain, None, {}
        return stages.first(marked, marked.output_structure, make)

    return stages.stage(dataset, "map", fn, build, make)


class _OneDeviceMap(dataset_ops.UnaryDataset):
    """A map or parallel map dataset of a function marked ``stages.ONE_DEVICE``."""

    def __init__(
        self,
        input_dataset: tf.data.Dataset,
        kept: stages.Kept,
        captured: list[Any],
        num_parallel_calls: int | None,
        deterministic: bool | None,
    ) -> None:
        self._input_dataset = input_dataset
        self._name = None
        self._kept = kept
        if num_parallel_calls is None:
            variant = gen_dataset_ops.map_dataset(
                input_dataset._variant_tensor,
                captured,
                f=kept.wrapper.function,
                use_inter_op_parallelism=True,
                preserve_cardinality=True,
                **self._common_args,
            )
        else:
            variant = gen_dataset_ops.parallel_map_dataset_v2(
                input_dataset._variant_tensor,
                captured,
                f=kept.wrapper.function,
                num_parallel_calls=tf.convert_to_tensor(num_parallel_calls, tf.int64),
                deterministic={None: "default", True: "true", False: "false"}[deterministic],
                use_inter_op_parallelism=True,
                preserve_cardinality=True,
                **self._common_args,
            )
        super().__init__(input_dataset, variant)

    def _functions(self) -> list[Any]:
        return [self._kept.wrapper]

    @property
    def element_spec(self) -> Any:
        return self._kept.element_spec
