"""The ``object-input`` command line.

Only argparse runs before a command is chosen, so ``--help`` never loads TensorFlow. Commands
load it through :func:`load_tensorflow`, which keeps TensorFlow's C++ start-up lines off the
terminal unless ``--verbose`` is given.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import shutil
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from object_input import wording

PROG = "object-input"
# Set before TensorFlow loads: only errors from its C++ logging; gRPC quiet too.
QUIET_ENVIRONMENT = {"TF_CPP_MIN_LOG_LEVEL": "2", "GRPC_VERBOSITY": "ERROR"}

DESCRIPTION = """\
Fast, correct tf.data input pipelines for object detection.

Start with `object-input demo --output data`: it writes a small dataset, a label map and a
pipeline.config, runs the pipeline, and prints the commands to look at the result."""


def load_tensorflow(verbose: bool = False) -> None:
    """Import TensorFlow; unless ``verbose``, without its start-up log lines.

    Some of those lines (oneDNN, CUDA, cpu_feature_guard, cuInit) are written by C++ logging
    before TF_CPP_MIN_LOG_LEVEL is read, so stderr is also held aside while TensorFlow loads and
    finds its devices; what was written there is shown only if loading fails.
    """
    if "tensorflow" in sys.modules:
        return
    if verbose:
        import tensorflow  # noqa: F401

        return
    for key, value in QUIET_ENVIRONMENT.items():
        os.environ.setdefault(key, value)
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices()
            tf.get_logger().setLevel("ERROR")
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def program() -> str:
    """How to run ``object-input`` from here: the bare name when it is on PATH, else the script
    beside this Python (``.venv/bin/object-input`` in a venv that is not activated)."""
    if shutil.which(PROG):
        return PROG
    script = os.path.join(os.path.dirname(sys.executable), PROG)
    if not os.path.isfile(script):
        return f"{shlex.quote(sys.executable)} -m object_input.cli"
    relative = os.path.relpath(script)
    return shlex.quote(script if relative.startswith("..") else relative)


def _fail(command: str, err: BaseException) -> int:
    import tensorflow as tf

    from object_input.reliability.errors import pipeline_message

    if isinstance(err, tf.errors.OpError):
        message = pipeline_message(err)
    else:
        message = getattr(err, "message", None) or str(err)
    print(f"object-input {command}: error: {message}", file=sys.stderr)
    return 1


def _user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input or setup: reported in one line, not as a traceback."""
    import tensorflow as tf

    return (ImportError, OSError, ValueError, tf.errors.OpError)


# demo ------------------------------------------------------------------------------------------

DEMO_CONFIG = """\
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


def _demo(args: argparse.Namespace) -> int:
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
            file.write(DEMO_CONFIG.format(batch_size=args.batch_size, max_boxes=args.max_boxes))
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


# show ------------------------------------------------------------------------------------------


def _detect(source: Any, options: dict[str, Any]) -> None:
    """Decode masks and keypoints whenever the first records carry them."""
    from object_input.verification.inspection import inspect_records

    try:
        report = inspect_records(source, limit=16, decode_images=False)
    except (OSError, ValueError):
        return  # not TFRecord files: make_dataset reads them, or reports what is wrong
    if options.get("masks") is None:
        options["masks"] = report.masks()
    if not options.get("num_keypoints"):
        options["num_keypoints"] = report.num_keypoints()


def _show(args: argparse.Namespace) -> int:
    import object_input as oi
    from object_input import viz
    from object_input.keras import layout as keras_layout
    from object_input.label_map import label_map_to_names

    try:
        viz.require_matplotlib()
        config = oi.load_pipeline_config(args.config) if args.config else None
        options = {} if config is None else config.to_dataset_kwargs()
        source = args.source or options.get("source")
        if not source:
            raise ValueError("give a SOURCE (glob, folder or files) or a --config with inputs")
        # Every box the steps leave is drawn, crowded images too: the box limit is reported
        # apart, so that the drop count names only what decoding and the steps removed.
        max_boxes = options.pop("max_boxes", None)
        overflow = options.pop("box_overflow", "error")
        options.update(
            source=source, batch_size=1, num_epochs=1, drop_remainder=False, batching="dynamic"
        )
        if args.label_map:
            options["label_map"] = args.label_map
        for name in ("seed", "masks", "num_keypoints"):
            if getattr(args, name) is not None:
                options[name] = getattr(args, name)
        _detect(source, options)
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
    except _user_errors() as err:
        return _fail("show", err)
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
    _print_skips(full)
    print(path)
    return 0


def _print_skips(dataset: object) -> None:
    """The skip summary of a make_dataset dataset, when it skipped anything."""
    import object_input as oi

    summary = oi.stats(dataset)
    if summary.total_skipped:
        print(summary.format())
        for offender in summary.offenders:
            print(f"  skipped {offender}")


# inspect ---------------------------------------------------------------------------------------


def _inspect(args: argparse.Namespace) -> int:
    from object_input.verification.inspection import inspect_records

    if args.verify:
        return _verify(args)
    try:
        report = inspect_records(
            args.files,
            limit=args.limit,
            label_map=args.label_map,
            decode_images=not args.no_decode,
        )
    except _user_errors() as err:
        return _fail("inspect", err)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format())
    return 1 if report.corrupt or report.class_conflicts() else 0


def _verify(args: argparse.Namespace) -> int:
    import object_input as oi
    from object_input.verification.verify import verify_files

    try:
        options = oi.load_pipeline_config(args.config).to_dataset_kwargs() if args.config else {}
        for name in ("label_map", "masks", "num_keypoints"):
            if getattr(args, name) is not None:
                options[name] = getattr(args, name)
        reading = oi.ReadOptions(**options.get("reading", {}))
        settings = dict(
            label_map=options.get("label_map"),
            masks=options.get("masks"),
            num_keypoints=options.get("num_keypoints", 0),
            decoding=options.get("decoding"),
            compression=reading.compression,
        )
        if args.runner is not None:
            from object_input.verification.beam import verify_files_on_beam

            result = verify_files_on_beam(
                args.files, runner=args.runner, beam_options=args.beam_options, **settings
            )
        else:
            result = verify_files(args.files, **settings)
    except _user_errors() as err:
        return _fail("inspect --verify", err)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.format())
    return 0 if result.ok else 1


# convert ---------------------------------------------------------------------------------------

#: Exit status of ``convert`` when it wrote the records but left images out (without
#: ``--on-error``): not 0, the data is not what was asked for; not 1, the records are written.
LEFT_OUT_STATUS = 3


def _add_write_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of every ``WriteOptions`` field, each setting the field of its name."""
    from object_input.converters.write_options import WriteOptions

    for field in dataclasses.fields(WriteOptions):
        flag = field.metadata["flag"]
        parser.add_argument(
            flag.name, dest=field.name, **{"default": field.default, **flag.options}
        )


def _write_options(args: argparse.Namespace) -> Any:
    """The ``WriteOptions`` the parsed flags give (a flag left out whose value is None: the
    field's default)."""
    from object_input.converters.write_options import FIELDS, WriteOptions

    given = {name: getattr(args, name) for name in FIELDS}
    return WriteOptions(**{name: value for name, value in given.items() if value is not None})


def _convert(args: argparse.Namespace) -> int:
    from object_input import converters
    from object_input.converters.common import failed_check

    try:
        write = _write_options(args)
        if args.format == "coco":
            result = converters.convert_coco(
                args.annotations,
                args.images,
                args.output,
                masks=not args.no_masks,
                keypoints=not args.no_keypoints,
                include_crowd=not args.no_crowd,
                write=write,
            )
        elif args.format == "voc":
            result = converters.convert_voc(
                args.annotations,
                args.output,
                images=args.images,
                image_set=args.image_set,
                include_difficult=not args.no_difficult,
                clip_boxes=args.clip_boxes,
                write=write,
            )
        elif args.format == "csv":
            result = converters.convert_csv(
                args.csv,
                args.images,
                args.output,
                clip_boxes=args.clip_boxes,
                field_delim=args.field_delim,
                write=write,
            )
        else:
            result = converters.convert_folders(args.root, args.output, write=write)
    except _user_errors() as err:
        return _fail(f"convert {args.format}", err)
    print(result.summary())
    for message in result.skipped:
        print(f"  skipped: {message}")
    for message in result.left_out:
        print(f"  left out: {message}")
    print(f"next: {program()} inspect {shlex.quote(result.pattern)}")
    if args.format == "folders":
        print(
            f"  make_dataset({result.pattern!r}, keras='classification') gives (images, labels) "
            "for a Keras classifier"
        )
    if result.left_out and args.on_error is None:
        were = "was" if len(result.left_out) == 1 else "were"
        print(
            f"object-input convert {args.format}: {failed_check(len(result.left_out))} and "
            f"{were} left out (listed above); exit status {LEFT_OUT_STATUS} "
            "(--on-error skip accepts that, --on-error raise stops at the first)",
            file=sys.stderr,
        )
        return LEFT_OUT_STATUS
    return 0


# bench -----------------------------------------------------------------------------------------


def _bench(args: argparse.Namespace) -> int:
    import object_input as oi
    from object_input.writers.parallel import progress_bar

    try:
        config = oi.load_pipeline_config(args.config) if args.config else None
        options = {} if config is None else config.to_dataset_kwargs()
        source = args.source or options.get("source")
        if not source:
            raise ValueError("give DATA (glob, folder or files) or a --config with inputs")
        options.update(source=source, num_epochs=None)
        options.setdefault("batch_size", 32)
        if args.batch_size is not None:
            options["batch_size"] = args.batch_size
        if args.image_size is not None:
            if len(args.image_size) > 2:
                raise ValueError(
                    "--image-size takes SIZE or HEIGHT WIDTH, got "
                    + " ".join(str(size) for size in args.image_size)
                )
            options["image_size"] = tuple(args.image_size * (3 - len(args.image_size)))
        if args.seed is not None:
            options["seed"] = args.seed
        if config is None:
            _detect(source, options)
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
    except _user_errors() as err:
        return _fail("bench", err)
    print(
        f"{images / wall:.1f} images/s, {1000 * cpu / images:.2f} CPU ms per image "
        f"({wording.count(images, 'image')} in {wording.count(args.steps, 'batch')} "
        f"of {options['batch_size']}, "
        f"{wall:.2f} s after {wording.count(args.warmup, 'warm-up batch')}; "
        f"{wording.count(os.cpu_count() or 1, 'CPU')})"
    )
    _print_skips(dataset)
    return 0


# serve -----------------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    from object_input.scale_out import service

    def say(line: str) -> None:
        print(f"object-input serve: {line}", flush=True)

    try:
        if args.role == "dispatcher":
            settings = service.DispatcherSettings(
                port=args.port,
                host=args.host,
                work_dir=args.work_dir,
                fault_tolerant_mode=False if args.no_fault_tolerance else None,
                worker_timeout_ms=args.worker_timeout_ms,
                job_gc_timeout_ms=args.job_gc_timeout_ms,
            )
            load_tensorflow(args.verbose)
            return service.run_dispatcher(settings, say)
        worker = service.WorkerSettings(
            dispatcher=args.dispatcher,
            port=args.port,
            host=args.host,
            heartbeat_interval_ms=args.heartbeat_interval_ms,
        )
        if args.no_restart:
            load_tensorflow(args.verbose)
            return service.run_worker(worker, say)
        # The supervisor keeps the worker's address across restarts: fix the port first.
        worker = dataclasses.replace(worker, port=worker.port or service.free_port())
        return service.supervise_worker(service.worker_command(worker, args.verbose), say)
    except (ImportError, OSError, ValueError) as err:
        return _fail("serve", err)


# parser ----------------------------------------------------------------------------------------


def _at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer of at least ``minimum``, else a usage error that names
    the flag (not the ``make_dataset`` option it becomes)."""

    def integer(text: str) -> int:
        value = int(text)  # a ValueError reads "invalid integer value: 'x'"
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return integer


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show TensorFlow's start-up and warning log lines",
    )
    return common


def _add_demo(commands: Any, common: argparse.ArgumentParser) -> None:
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
    demo.set_defaults(run=_demo)


def _add_show(commands: Any, common: argparse.ArgumentParser) -> None:
    show = commands.add_parser(
        "show",
        parents=[common],
        help="draw augmented examples (boxes, classes, masks, keypoints) into a PNG grid",
        description="Decode and augment examples as make_dataset does, and draw them in a grid "
        "to see what a config does before training on it. Masks and keypoints are drawn "
        "whenever the records have them. Needs matplotlib (pip install object-input[viz]).",
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
        "-n", "--num-examples", type=_at_least(1), default=16, help="examples to draw (default 16)"
    )
    show.add_argument("-o", "--output", default="grid.png", help="PNG to write (default grid.png)")
    show.add_argument("--columns", type=_at_least(1), help="grid columns (default: about a square)")
    show.add_argument("--seed", type=int, help="pipeline seed (default: the config's)")
    show.add_argument("--label-map", help="text label map: names for ids (overrides the config)")
    show.add_argument(
        "--masks",
        choices=("png", "numerical"),
        help="how the records store masks (default: the config's, else detected from the records)",
    )
    show.add_argument(
        "--num-keypoints",
        type=_at_least(0),
        help="keypoints per box (default: the config's, else detected from the records)",
    )
    show.add_argument(
        "--no-augment", action="store_true", help="show the decoded data, unaugmented"
    )
    _add_on_error(show)
    show.set_defaults(run=_show)


def _add_inspect(commands: Any, common: argparse.ArgumentParser) -> None:
    inspect = commands.add_parser(
        "inspect",
        parents=[common],
        help="count records and summarize features, image sizes, boxes, classes; find corrupt "
        "records",
        description="Read TFRecord files record by record and print the record count, the "
        "feature keys with their types and value counts (the schema, inferred), image size "
        "statistics, boxes per image, class counts, and every corrupt record with its file "
        "and index: unreadable, not a tf.train.Example, or with an image that does not decode "
        "in full (a truncated JPEG among them), and where the files, their label_map.pbtxt "
        "and --label-map give a class id two names. Exits with status 1 when a record is "
        "corrupt or class ids disagree.",
    )
    inspect.add_argument("files", nargs="+", help="TFRecord glob, folder or files")
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.add_argument("--limit", type=int, help="read at most this many records")
    inspect.add_argument(
        "--no-decode",
        action="store_true",
        help="do not decode the images (faster; a broken image is then not found)",
    )
    inspect.add_argument(
        "--label-map",
        help="text label map naming the class ids (default: a label_map.pbtxt beside the "
        "files, then the names in the records); with "
        "--verify, the label map records are decoded with",
    )
    verify = inspect.add_argument_group(
        "verify",
        "--verify decodes every record through make_dataset's checks, with the decoding "
        "settings you train with (--config, --label-map, --masks, --num-keypoints), and writes "
        "object_input_manifest.json beside the files whose records all pass: make_dataset then "
        "reads them without the per-record checks (docs/reliability.md). The files with bad "
        "records are listed (file:index and reason) and the exit status is 1.",
    )
    verify.add_argument(
        "--verify", action="store_true", help="verify every record and write the manifest"
    )
    verify.add_argument(
        "--config", help="pipeline.config or YAML whose decoding settings to verify under"
    )
    verify.add_argument(
        "--masks", choices=("png", "numerical"), help="decode masks as training does (default none)"
    )
    verify.add_argument(
        "--num-keypoints", type=int, help="keypoints per box, as training decodes (default 0)"
    )
    verify.add_argument(
        "--runner",
        help="verify the files in an Apache Beam pipeline on this runner (DirectRunner, "
        "DataflowRunner, FlinkRunner, SparkRunner; pip install object-input[beam]); the same "
        "verdicts and manifest",
    )
    verify.add_argument(
        "--beam-options",
        metavar="FLAGS",
        help='more Beam pipeline options for --runner, as one string: --beam-options="..."',
    )
    inspect.set_defaults(run=_inspect)


def _add_convert(commands: Any, common: argparse.ArgumentParser) -> None:
    convert = commands.add_parser(
        "convert",
        parents=[common],
        help="convert COCO, Pascal VOC, CSV or class-folder datasets to TFRecords",
        description="Convert a dataset to sharded detection TFRecords and a label map "
        "(label_map.pbtxt beside the shards), building records on parallel threads. Every "
        "image is decoded in full: one that does not decode, is truncated or whose size "
        "disagrees with its annotation is left out and named (exit status 3), or with "
        "--on-error raise stops the conversion; when every image fails, nothing is written "
        "(exit status 1). The shards get their names only once the conversion has succeeded, "
        "and replace the dataset under the same prefix. Needs "
        "pycocotools for COCO masks and tqdm for the progress bar "
        "(pip install object-input[convert]).",
    )
    shared = argparse.ArgumentParser(add_help=False, parents=[common])
    shared.add_argument(
        "-o",
        "--output",
        required=True,
        help="path prefix of the shards: out/train writes out/train-00000-of-0000N.tfrecord "
        "and removes the shards of another count an earlier run left under out/train",
    )
    _add_write_arguments(shared)
    formats = convert.add_subparsers(dest="format", required=True, metavar="FORMAT")
    coco = formats.add_parser(
        "coco",
        parents=[shared],
        help="COCO JSON: boxes, categories, iscrowd, area, masks, keypoints",
        description="Convert a COCO annotation file: boxes, category ids and names, iscrowd, "
        "area, polygon and RLE segmentations as PNG masks, keypoints with visibilities.",
    )
    coco.add_argument("annotations", help="COCO JSON file (instances_*.json, person_keypoints_*)")
    coco.add_argument("images", help="folder the images' file_name are relative to")
    coco.add_argument("--no-masks", action="store_true", help="do not write instance masks")
    coco.add_argument("--no-keypoints", action="store_true", help="do not write keypoints")
    coco.add_argument("--no-crowd", action="store_true", help="leave out iscrowd annotations")
    voc = formats.add_parser(
        "voc",
        parents=[shared],
        help="Pascal VOC XML folder: boxes, classes, difficult, truncated, pose",
        description="Convert Pascal VOC XML annotations (one file per image): boxes, class "
        "names, difficult, truncated and pose.",
    )
    voc.add_argument("annotations", help="folder of XML files, or a VOC root with Annotations/")
    voc.add_argument("--images", help="image folder (default: JPEGImages beside the annotations)")
    voc.add_argument("--image-set", help="list of image ids to convert (ImageSets/Main/train.txt)")
    voc.add_argument(
        "--no-difficult", action="store_true", help="leave out objects marked difficult"
    )
    csv = formats.add_parser(
        "csv",
        parents=[shared],
        help="detection CSV: filename,width,height,class,xmin,ymin,xmax,ymax (pixels)",
        description="Convert a CSV with one row per box and the header "
        "filename,width,height,class,xmin,ymin,xmax,ymax (pixel coordinates); an image's rows "
        "may be anywhere in the file. A row with an empty class and coordinates is an image "
        "without boxes.",
    )
    csv.add_argument("csv", help="the CSV file")
    csv.add_argument("images", help="folder the filename column is relative to")
    csv.add_argument(
        "--field-delim",
        type=lambda text: "\t" if text == "\\t" else text,
        default=",",
        metavar="CHAR",
        help="the field separator, one character (default ','; e.g. ';', or '\\t' for tabs)",
    )
    for parser in (voc, csv):
        parser.add_argument(
            "--clip-boxes",
            action="store_true",
            help="clip boxes reaching outside their image (default: stop with an error naming "
            "the box); boxes left empty are skipped and listed",
        )
    folders = formats.add_parser(
        "folders",
        parents=[shared],
        help="class-per-folder image tree: ROOT/<class>/<image> to image-level classes",
        description="Convert ROOT/<class>/<image> trees: each record holds an image and its "
        "class (image/class/label and image/class/text), no boxes.",
    )
    folders.add_argument("root", help="folder whose subfolders are the classes")
    convert.set_defaults(run=_convert)


def _add_bench(commands: Any, common: argparse.ArgumentParser) -> None:
    bench = commands.add_parser(
        "bench",
        parents=[common],
        help="time a pipeline on your own data: images/s and CPU ms per image",
        description="Run make_dataset on your data (with your config) for a number of batches "
        "after a warm-up, and print images/s and the process's CPU milliseconds per image.",
    )
    bench.add_argument(
        "source", nargs="*", help="TFRecord glob, folder or files (default: the config's inputs)"
    )
    bench.add_argument(
        "--config", help="pipeline.config or YAML whose pipeline to time (default: no augmentation)"
    )
    bench.add_argument(
        "--batch-size",
        type=_at_least(1),
        help="examples per batch (default: the config's, else 32)",
    )
    bench.add_argument(
        "--image-size",
        type=_at_least(1),
        nargs="+",
        metavar="SIZE",
        help="resize to SIZE (square) or HEIGHT WIDTH (default: no resize)",
    )
    bench.add_argument(
        "--steps", type=_at_least(1), default=50, help="batches to time (default 50)"
    )
    bench.add_argument(
        "--warmup",
        type=_at_least(0),
        default=5,
        help="batches run before timing starts (default 5)",
    )
    bench.add_argument("--seed", type=int, help="pipeline seed (default: the config's)")
    _add_on_error(bench)
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.set_defaults(run=_bench)


def _add_serve(commands: Any, common: argparse.ArgumentParser) -> None:
    from object_input.scale_out import service  # no TensorFlow at import

    serve = commands.add_parser(
        "serve",
        parents=[common],
        help="run a tf.data service dispatcher or worker for make_dataset(service=...)",
        description="Start one tf.data service server on this machine and serve until SIGTERM "
        "or Ctrl-C: one dispatcher per cluster, one worker per machine that decodes and "
        "augments. The address is printed when the server is up (docs/scale_out.md).",
    )
    roles = serve.add_subparsers(dest="role", required=True, metavar="ROLE")
    dispatcher = roles.add_parser(
        "dispatcher",
        parents=[common],
        help="the dispatcher: hands out the jobs and the input files",
        description="Serve the dispatcher. With --work-dir it journals its state there "
        "(fault_tolerant_mode): restarted with the same --work-dir and --port it resumes its "
        "jobs.",
    )
    dispatcher.add_argument("--port", type=int, default=5050, help="port (default 5050; 0: any)")
    dispatcher.add_argument(
        "--work-dir", help="durable folder for the journal (a shared disk or gs:// path)"
    )
    dispatcher.add_argument(
        "--no-fault-tolerance",
        action="store_true",
        help="do not journal the state even with --work-dir",
    )
    dispatcher.add_argument(
        "--worker-timeout-ms",
        type=int,
        default=service.WORKER_TIMEOUT_MS,
        help="a worker silent this long is reported missing (default %(default)s)",
    )
    dispatcher.add_argument(
        "--job-gc-timeout-ms",
        type=int,
        default=service.JOB_GC_TIMEOUT_MS,
        help="a job without consumers is dropped after this long; -1: never (default %(default)s)",
    )
    worker = roles.add_parser(
        "worker",
        parents=[common],
        help="a worker: reads, decodes, augments and batches",
        description="Serve a worker. It keeps one address (--host:--port) and is started "
        "again at that address when it dies: the dispatcher gives a worker's unfinished tasks "
        "only to the worker at the same address, so an epoch can end only once it is back.",
    )
    worker.add_argument(
        "--dispatcher", required=True, help="the dispatcher's address, host:port or grpc://..."
    )
    worker.add_argument(
        "--port", type=int, default=0, help="port (default: a free port, kept across restarts)"
    )
    worker.add_argument(
        "--heartbeat-interval-ms", type=int, help="heartbeat period (default TensorFlow's)"
    )
    worker.add_argument(
        "--no-restart", action="store_true", help="serve once; do not start again after a crash"
    )
    for parser in (dispatcher, worker):
        parser.add_argument(
            "--host",
            default=socket.gethostname(),
            help="the name others reach this machine by (default: the host name)",
        )
    serve.set_defaults(run=_serve, tensorflow=False)


def _version() -> str:
    from object_input import __version__

    return __version__


def _add_on_error(parser: argparse.ArgumentParser) -> None:
    """``--on-error``, make_dataset's (errors.ON_ERROR_POLICIES, without loading TensorFlow):
    the choices in the order every command gives them."""
    parser.add_argument(
        "--on-error",
        choices=("raise", "skip"),
        default="raise",
        help="bad records: raise (stop, naming the first) or skip (drop, count and report them) "
        "(default: raise)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``object-input``."""
    common = _common_options()
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show TensorFlow's start-up and warning log lines",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"object-input {_version()}",
        help="print the version",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_demo, _add_convert, _add_inspect, _add_show, _add_bench, _add_serve):
        add(commands, common)
    return parser


def _show_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    """A warning as one line naming the command's program, not Python's source line."""
    print(f"object-input: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``object-input`` console script."""
    args = build_parser().parse_args(argv)
    if getattr(args, "tensorflow", True):
        load_tensorflow(args.verbose)
    with warnings.catch_warnings():
        if not args.verbose:
            warnings.showwarning = _show_warning
        return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
