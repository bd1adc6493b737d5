"""``object-input bench``: time ``make_dataset`` on your data, in images/s and CPU ms per
image."""

from __future__ import annotations

import argparse
import os
import time
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
    """Register ``bench`` and its flags."""
    bench = commands.add_parser(
        "bench",
        parents=[common],
        help="time a pipeline on your own data: images/s and CPU ms per image",
        description="Run make_dataset on your data (with your config) for a number of batches "
        "after a warm-up, and print images/s and the process's CPU milliseconds per image.",
    )
    add_source_and_config(
        bench, "pipeline.config or YAML whose pipeline to time (default: no augmentation)"
    )
    bench.add_argument(
        "--batch-size",
        type=at_least(1),
        help="examples per batch (default: the config's, else 32)",
    )
    bench.add_argument(
        "--image-size",
        type=at_least(1),
        nargs="+",
        metavar="SIZE",
        help="resize to SIZE (square) or HEIGHT WIDTH (default: no resize)",
    )
    bench.add_argument("--steps", type=at_least(1), default=50, help="batches to time (default 50)")
    bench.add_argument(
        "--warmup",
        type=at_least(0),
        default=5,
        help="batches run before timing starts (default 5)",
    )
    bench.add_argument("--seed", type=int, help="pipeline seed (default: the config's)")
    add_on_error(bench)
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``bench``; the exit status."""
    import object_input as oi
    from object_input.writers.parallel import progress_bar

    try:
        config, options, source = dataset_options(args, "DATA")
        options.update(source=source, num_epochs=None)
        options.setdefault("batch_size", 32)
        override(options, args, ("batch_size", "seed"))
        if args.image_size is not None:
            if len(args.image_size) > 2:
                raise ValueError(
                    "--image-size takes SIZE or HEIGHT WIDTH, got "
                    + " ".join(str(size) for size in args.image_size)
                )
            options["image_size"] = tuple(args.image_size * (3 - len(args.image_size)))
        if config is None:
            detect(source, options)
        options["on_error"] = args.on_error
        dataset = oi.make_dataset(**options)
        iterator = iter(dataset)
        for _ in range(args.warmup):
            next(iterator)
        bar = progress_bar(args.steps, "bench", not args.no_progress, unit="batch")
        images = 0
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(args.steps):
            batch = next(iterator)
            images += int(batch[oi.fields.IMAGE].shape[0])
            bar.update(1)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        bar.close()
    except user_errors() as err:
        return fail("bench", err)
    print(
        f"{images / wall:.1f} images/s, {1000 * cpu / images:.2f} CPU ms per image "
        f"({wording.count(images, 'image')} in {wording.count(args.steps, 'batch')} "
        f"of {options['batch_size']}, "
        f"{wall:.2f} s after {wording.count(args.warmup, 'warm-up batch')}; "
        f"{wording.count(os.cpu_count() or 1, 'CPU')})"
    )
    print_skips(dataset)
    return 0
