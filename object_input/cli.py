"""The ``object-input`` command line."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    import object_input as oi
    from object_input.synthetic import write_synthetic_dataset

    with tempfile.TemporaryDirectory() as tmp:
        directory = args.output or tmp
        paths = write_synthetic_dataset(
            directory, args.num_examples, args.num_shards, seed=args.seed
        )
        print(
            f"wrote {args.num_examples} synthetic examples to {len(paths)} TFRecord shards "
            f"in {directory}"
        )
        dataset = oi.make_dataset(
            os.path.join(directory, "*.tfrecord"),
            batch_size=args.batch_size,
            augment=[("random_horizontal_flip", {"probability": 0.5})],
            image_size=(args.image_size, args.image_size),
            max_boxes=args.max_boxes,
            masks="png",
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
        f"{batches} batches, {images} images in {elapsed:.2f} s: "
        f"{images / elapsed:.1f} images/s (first batch after {first:.2f} s)"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``object-input``."""
    parser = argparse.ArgumentParser(prog="object-input", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="write a synthetic detection dataset and run the full pipeline on it"
    )
    demo.add_argument("--num-examples", type=int, default=256)
    demo.add_argument("--num-shards", type=int, default=4)
    demo.add_argument("--batch-size", type=int, default=8)
    demo.add_argument("--image-size", type=int, default=128)
    demo.add_argument("--max-boxes", type=int, default=20)
    demo.add_argument("--epochs", type=int, default=2)
    demo.add_argument("--seed", type=int, default=1)
    demo.add_argument("--output", help="keep the dataset in this folder (default: a temp folder)")
    demo.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``object-input`` console script."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
