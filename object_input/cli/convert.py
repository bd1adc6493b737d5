"""``object-input convert``: COCO, Pascal VOC, CSV and class-folder datasets to sharded
detection TFRecords and a label map."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from typing import Any

from object_input.cli._common import fail, program, user_errors

#: Exit status of ``convert`` when it wrote the records but left images out (without
#: ``--on-error``): not 0, the data is not what was asked for; not 1, the records are written.
LEFT_OUT_STATUS = 3


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register ``convert``, its formats and their flags."""
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
    convert.set_defaults(run=run)


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


def run(args: argparse.Namespace) -> int:
    """Run ``convert``; the exit status."""
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
    except user_errors() as err:
        return fail(f"convert {args.format}", err)
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
