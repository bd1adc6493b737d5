"""The ``object-input`` command line: ``main`` and the parser that assembles the commands.

Each command is a module of this package (``demo``, ``convert``, ``inspect``, ``show``,
``bench``, ``serve``) with an ``add_parser`` that registers its subparser and a ``run`` that
the parsed arguments name; what they share is in ``_common``. Only argparse runs before a
command is chosen, so ``--help`` never loads TensorFlow. Commands load it through
:func:`~object_input.cli._common.load_tensorflow`, which keeps TensorFlow's C++ start-up lines
off the terminal unless ``--verbose`` is given.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from object_input.cli import bench, convert, demo, inspect, serve, show
from object_input.cli._common import PROG, common_options, load_tensorflow

#: The command modules, in the order ``--help`` lists them.
COMMANDS = (demo, convert, inspect, show, bench, serve)

DESCRIPTION = """\
Fast, correct tf.data input pipelines for object detection.

Start with `object-input demo --output data`: it writes a small dataset, a label map and a
pipeline.config, runs the pipeline, and prints the commands to look at the result."""


def _version() -> str:
    from object_input import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``object-input``."""
    common = common_options()
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
    for command in COMMANDS:
        command.add_parser(commands, common)
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
