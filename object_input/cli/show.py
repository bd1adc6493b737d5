"""``object-input show``: decode and augment examples as ``make_dataset`` does and draw them in
a PNG grid."""

from __future__ import annotations

import argparse
import os
from typing import Any

from object_input import wording
from object_input.cli._common import (
    add_on_error,
    add_source_and_config,
    at_least,
    dataset_options,
    detect,
    fail,
    override,
    print_skips,
    user_errors,
)


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register ``show`` and its flags."""
    show = commands.add_parser(
        "show",
        parents=[common],
        help="draw augmented examples (boxes, classes, masks, keypoints) into a PNG grid",
        description="Decode and augment examples as make_dataset does, and draw them in a grid "
        "to see what a config does before training on it. Masks and keypoints are drawn "
        "whenever the records have them. Needs matplotlib (pip install object-input[viz]).",
    )
    add_source_and_config(
        show,
        "pipeline.config or YAML; its augmentation, label map, masks, keypoints and shuffle "
        "settings apply",
    )
    show.add_argument(
        "-n", "--num-examples", type=at_least(1), default=16, help="examples to draw (default 16)"
    )
    show.add_argument("-o", "--output", default="grid.png", help="PNG to write (default grid.png)")
    show.add_argument("--columns", type=at_least(1), help="grid columns (default: about a square)")
    show.add_argument("--seed", type=int, help="pipeline seed (default: the config's)")
    show.add_argument("--label-map", help="text label map: names for ids (overrides the config)")
    show.add_argument(
        "--masks",
        choices=("png", "numerical"),
        help="how the records store masks (default: the config's, else detected from the records)",
    )
    show.add_argument(
        "--num-keypoints",
        type=at_least(0),
        help="keypoints per box (default: the config's, else detected from the records)",
    )
    show.add_argument(
        "--no-augment", action="store_true", help="show the decoded data, unaugmented"
    )
    add_on_error(show)
    show.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``show``; the exit status."""
    import object_input as oi
    from object_input import viz
    from object_input.keras import layout as keras_layout
    from object_input.label_map import label_map_to_names

    try:
        viz.require_matplotlib()
        config, options, source = dataset_options(args, "a SOURCE")
        # Every box the steps leave is drawn, crowded images too: the box limit is reported
        # apart, so that the drop count names only what decoding and the steps removed.
        max_boxes = options.pop("max_boxes", None)
        overflow = options.pop("box_overflow", "error")
        options.update(
            source=source, batch_size=1, num_epochs=1, drop_remainder=False, batching="dynamic"
        )
        if args.label_map:
            options["label_map"] = args.label_map
        override(options, args, ("seed", "masks", "num_keypoints"))
        detect(source, options)
        if args.no_augment:
            options["augment"] = []
        options["on_error"] = args.on_error
        full = oi.make_dataset(**options)
        examples = [
            example for batch in full.take(args.num_examples) for example in oi.unpad_batch(batch)
        ]
        if not examples:
            raise ValueError(f"no examples in {source!r}")
        label_map = args.label_map or (config.label_map_path if config else None)
        # Without one given, the names are those of the data's own label map (beside its files).
        classes = keras_layout.label_space(full)
        if label_map:
            class_names = label_map_to_names(label_map)
        elif classes is not None:
            class_names = dict(zip(classes.ids, classes.names, strict=True))
        else:
            class_names = None
        steps = [name for step in options.get("augment", ()) for name in step]
        title = ", ".join(steps) or "no augmentation"
        if args.config:
            title = f"{os.path.basename(args.config)}: {title}"
        path = viz.render_grid(examples, args.output, class_names, args.columns, title)
    except user_errors() as err:
        return fail("show", err)
    dropped = sum(int(e.get(oi.fields.NUM_DROPPED_BOXES, 0)) for e in examples)
    if dropped:
        by = "decoding or the steps" if options.get("augment") else "decoding"
        print(
            f"{wording.count(dropped, 'box')} dropped by {by} (crops, box filters, clipping, "
            "unknown classes): not drawn"
        )
    crowded = max_boxes and sum(len(e.get(oi.fields.BOXES, ())) > max_boxes for e in examples)
    if crowded:
        training = (
            f"keeps their first {max_boxes}" if overflow == "truncate" else "stops with an error"
        )
        print(
            f"{wording.count(crowded, 'image')} with more than max_boxes={max_boxes} boxes, all "
            f"drawn: training {training} (box_overflow={overflow!r})"
        )
    print_skips(full)
    print(path)
    return 0
