"""``object-input demo``: write a synthetic dataset, a label map and a pipeline.config, run the
pipeline on them, and print the commands that look at the result."""

from __future__ import annotations

import argparse
import os
import shlex
import tempfile
import time
from typing import Any

from object_input import wording
from object_input.cli._common import program

CONFIG = """\
# Written by `object-input demo`. Paths are relative to this file.
train_config {{
  batch_size: {batch_size}
  data_augmentation_options {{ random_horizontal_flip {{ }} }}
  data_augmentation_options {{ random_crop_image {{ }} }}
}}
train_input_reader {{
  label_map_path: "label_map.pbtxt"
  tf_record_input_reader {{ input_path: "train-*.tfrecord" }}
  max_number_of_boxes: {max_boxes}
  load_instance_masks: true
  mask_type: PNG_MASKS
}}
"""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register ``demo`` and its flags."""
    demo = commands.add_parser(
        "demo",
        parents=[common],
        help="write a synthetic detection dataset and run the full pipeline on it",
        description="Write a small synthetic dataset (coloured shapes with boxes, classes and "
        "masks), a label map and a pipeline.config, then run the full pipeline on it and print "
        "the batch shapes and images/s.",
    )
    demo.add_argument(
        "-o",
        "--output",
        help="keep the dataset, label map and config in this folder "
        "(default: a temporary folder, deleted at the end)",
    )
    demo.add_argument(
        "--num-examples", type=int, default=256, help="examples to write (default 256)"
    )
    demo.add_argument("--num-shards", type=int, default=4, help="TFRecord files (default 4)")
    demo.add_argument("--batch-size", type=int, default=8, help="examples per batch (default 8)")
    demo.add_argument(
        "--image-size", type=int, default=128, help="side of the square output images (default 128)"
    )
    demo.add_argument(
        "--max-boxes", type=int, default=20, help="boxes per example after padding (default 20)"
    )
    demo.add_argument("--epochs", type=int, default=2, help="passes over the data (default 2)")
    demo.add_argument("--seed", type=int, default=1, help="data and pipeline seed (default 1)")
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``demo``; the exit status."""
    import object_input as oi
    from object_input.label_map import write_label_map
    from object_input.writers import ShardedWriter, describe_replaced
    from object_input.writers.synthetic import CLASS_NAMES, synthetic_examples

    with tempfile.TemporaryDirectory() as tmp:
        directory = args.output or tmp
        prefix = os.path.join(directory, "train")
        with ShardedWriter(prefix, args.num_shards) as writer:
            for example in synthetic_examples(args.num_examples, seed=args.seed):
                writer.write(example)
        label_map = write_label_map(
            os.path.join(directory, "label_map.pbtxt"),
            {name: i for i, name in enumerate(CLASS_NAMES, start=1)},
        )
        config = os.path.join(directory, "pipeline.config")
        with open(config, "w", encoding="utf-8") as file:
            file.write(CONFIG.format(batch_size=args.batch_size, max_boxes=args.max_boxes))
        print(
            f"wrote {wording.count(args.num_examples, 'synthetic example')} to "
            f"{wording.count(len(writer.paths), 'TFRecord shard')}, "
            f"a label map and a pipeline.config in {directory}"
        )
        if writer.replaced:
            print(describe_replaced(prefix, writer.replaced))
        dataset = oi.make_dataset(
            os.path.join(directory, "train-*.tfrecord"),
            batch_size=args.batch_size,
            augment=[("random_horizontal_flip", {}), ("random_crop_image", {})],
            image_size=(args.image_size, args.image_size),
            max_boxes=args.max_boxes,
            masks="png",
            label_map=label_map,
            seed=args.seed,
            num_epochs=args.epochs,
        )
        start = time.perf_counter()
        images = batches = 0
        first = None
        for batch in dataset:
            if first is None:
                first = time.perf_counter() - start
                for name, value in sorted(batch.items()):
                    print(f"  {name:24s} {value.dtype.name:8s} {value.shape}")
            batches += 1
            images += int(batch[oi.fields.IMAGE].shape[0])
        elapsed = time.perf_counter() - start
    print(
        f"{wording.count(args.epochs, 'epoch')} of "
        f"{wording.count(args.num_examples, 'example')}: {wording.count(batches, 'batch')}, "
        f"{wording.count(images, 'image')} in {elapsed:.2f} s: {images / elapsed:.1f} images/s "
        f"(first batch after {first:.2f} s)"
    )
    if not args.output:
        print("the data was in a temporary folder and is gone; pass --output DIR to keep it")
        return 0
    pattern = shlex.quote(os.path.join(args.output, "train-*.tfrecord"))
    print("next: look inside the records, then draw what the pipeline.config does to them")
    print(f"  {program()} inspect {pattern}")
    print(
        f"  {program()} show --config {shlex.quote(config)} -n 16 "
        f"-o {shlex.quote(os.path.join(args.output, 'grid.png'))}"
    )
    return 0
