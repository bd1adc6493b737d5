"""``object-input inspect``: summarize TFRecord files and find their corrupt records; with
``--verify``, check every record as training decodes it and write the verified manifest."""

from __future__ import annotations

import argparse
import json
from typing import Any

from object_input.cli._common import config_options, fail, override, user_errors


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register ``inspect`` and its flags."""
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
    inspect.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``inspect``; the exit status."""
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
    except user_errors() as err:
        return fail("inspect", err)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format())
    return 1 if report.corrupt or report.class_conflicts() else 0


def _verify(args: argparse.Namespace) -> int:
    import object_input as oi
    from object_input.verification.verify import verify_files

    try:
        _, options = config_options(args.config)
        override(options, args, ("label_map", "masks", "num_keypoints"))
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
    except user_errors() as err:
        return fail("inspect --verify", err)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.format())
    return 0 if result.ok else 1
