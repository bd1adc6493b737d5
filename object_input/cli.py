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


def _show(args: argparse.Namespace) -> int:
    import tensorflow as tf

    import object_input as oi
    from object_input import viz
    from object_input.label_map import label_map_to_names

    try:
        if args.num_examples < 1:
            raise ValueError(f"-n must be >= 1, got {args.num_examples}")
        viz.require_matplotlib()
        config = oi.load_pipeline_config(args.config) if args.config else None
        options = {} if config is None else config.to_dataset_kwargs()
        source = args.source or options.get("source")
        if not source:
            raise ValueError("give a SOURCE (glob, folder or files) or a --config with inputs")
        options.update(
            source=source,
            batch_size=1,
            num_epochs=1,
            drop_remainder=False,
            # Show what training sees, but never fail on a crowded image: count the cut boxes.
            box_overflow="truncate",
        )
        if args.label_map:
            options["label_map"] = args.label_map
        for name in ("seed", "masks", "num_keypoints"):
            if getattr(args, name) is not None:
                options[name] = getattr(args, name)
        if args.no_augment:
            options["augment"] = []
        dataset = oi.make_dataset(**options).take(args.num_examples)
        examples = [example for batch in dataset for example in oi.unpad_batch(batch)]
        if not examples:
            raise ValueError(f"no examples in {source!r}")
        label_map = args.label_map or (config.label_map_path if config else None)
        class_names = label_map_to_names(label_map) if label_map else None
        steps = [name for step in options.get("augment", ()) for name in step]
        title = ", ".join(steps) or "no augmentation"
        if args.config:
            title = f"{os.path.basename(args.config)}: {title}"
        path = viz.render_grid(examples, args.output, class_names, args.columns, title)
    except (ImportError, OSError, ValueError) as err:
        print(f"object-input show: error: {err}", file=sys.stderr)
        return 1
    except tf.errors.OpError as err:
        print(f"object-input show: error: {err.message}", file=sys.stderr)
        return 1
    dropped = sum(int(e.get(oi.fields.NUM_DROPPED_BOXES, 0)) for e in examples)
    if dropped:
        print(f"{dropped} boxes beyond max_boxes were dropped and are not drawn")
    print(path)
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
    show = commands.add_parser(
        "show",
        help="draw augmented examples (boxes, classes, masks, keypoints) into a PNG grid",
        description="Decode and augment examples as make_dataset does, and draw them in a grid "
        "to see what a config does before training on it. Needs matplotlib "
        "(pip install object-input[viz]).",
    )
    show.add_argument(
        "source", nargs="*", help="TFRecord glob, folder or files (default: the config's inputs)"
    )
    show.add_argument(
        "--config",
        help="pipeline.config or YAML; its augmentation, label map, masks, keypoints and shuffle "
        "settings apply",
    )
    show.add_argument(
        "-n", "--num-examples", type=int, default=16, help="examples to draw (default 16)"
    )
    show.add_argument("-o", "--output", default="grid.png", help="PNG to write (default grid.png)")
    show.add_argument("--columns", type=int, help="grid columns (default: about a square)")
    show.add_argument("--seed", type=int, help="pipeline seed (default: the config's)")
    show.add_argument("--label-map", help="text label map: names for ids (overrides the config)")
    show.add_argument("--masks", choices=("png", "numerical"), help="decode instance masks")
    show.add_argument("--num-keypoints", type=int, help="keypoints per box to decode")
    show.add_argument(
        "--no-augment", action="store_true", help="show the decoded data, unaugmented"
    )
    show.set_defaults(run=_show)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``object-input`` console script."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
