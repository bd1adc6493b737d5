"""What the ``object-input`` commands share: the quiet TensorFlow load, the one-line error
report, the flags several commands take, and the config -> options -> source step of the
commands that run ``make_dataset``.

Nothing here imports TensorFlow at import time: ``--help`` must not load it.
"""

from __future__ import annotations

import argparse
import gc
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

PROG = "object-input"
# Set before TensorFlow loads: only errors from its C++ logging; gRPC quiet too.
QUIET_ENVIRONMENT = {"TF_CPP_MIN_LOG_LEVEL": "2", "GRPC_VERBOSITY": "ERROR"}


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
    else:
        _import_quietly()
    # TensorFlow's modules, about a million objects, live as long as the command: kept out of
    # the collector's full passes, the first of which would otherwise fall in the command's
    # first build (0.2 s).
    gc.freeze()


def _import_quietly() -> None:
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


def fail(command: str, err: BaseException) -> int:
    """Report ``err`` in one line naming ``command``; the exit status 1."""
    import tensorflow as tf

    from object_input.reliability.errors import pipeline_message

    if isinstance(err, tf.errors.OpError):
        message = pipeline_message(err)
    else:
        message = getattr(err, "message", None) or str(err)
    print(f"object-input {command}: error: {message}", file=sys.stderr)
    return 1


def user_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input or setup: reported in one line, not as a traceback."""
    import tensorflow as tf

    return (ImportError, OSError, ValueError, tf.errors.OpError)


# flags -----------------------------------------------------------------------------------------


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer of at least ``minimum``, else a usage error that names
    the flag (not the ``make_dataset`` option it becomes)."""

    def integer(text: str) -> int:
        value = int(text)  # a ValueError reads "invalid integer value: 'x'"
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return integer


def common_options() -> argparse.ArgumentParser:
    """The parent parser of every command: ``--verbose`` after the command too."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show TensorFlow's start-up and warning log lines",
    )
    return common


def add_on_error(parser: argparse.ArgumentParser) -> None:
    """``--on-error``, make_dataset's (errors.ON_ERROR_POLICIES, without loading TensorFlow):
    the choices in the order every command gives them."""
    parser.add_argument(
        "--on-error",
        choices=("raise", "skip"),
        default="raise",
        help="bad records: raise (stop, naming the first) or skip (drop, count and report them) "
        "(default: raise)",
    )


# config -> options -> source -------------------------------------------------------------------


def add_source_and_config(parser: argparse.ArgumentParser, config_help: str) -> None:
    """The SOURCE arguments and ``--config`` that :func:`dataset_options` reads."""
    parser.add_argument(
        "source", nargs="*", help="TFRecord glob, folder or files (default: the config's inputs)"
    )
    parser.add_argument("--config", help=config_help)


def config_options(path: str | None) -> tuple[Any, dict[str, Any]]:
    """The pipeline config at ``path`` (None without one) and the ``make_dataset`` options it
    gives (none without one)."""
    import object_input as oi

    config = oi.load_pipeline_config(path) if path else None
    return config, {} if config is None else config.to_dataset_kwargs()


def dataset_options(args: argparse.Namespace, missing: str) -> tuple[Any, dict[str, Any], Any]:
    """``--config``'s pipeline config, its ``make_dataset`` options and the source to read:
    the command's SOURCE arguments, else the config's inputs; without either, a ValueError
    asking for ``missing``."""
    config, options = config_options(args.config)
    source = args.source or options.get("source")
    if not source:
        raise ValueError(f"give {missing} (glob, folder or files) or a --config with inputs")
    return config, options, source


def override(options: dict[str, Any], args: argparse.Namespace, names: Iterable[str]) -> None:
    """Set each option of ``names`` whose flag was given (not None) to the flag's value."""
    for name in names:
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)


def detect(source: Any, options: dict[str, Any]) -> None:
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


def print_skips(dataset: object) -> None:
    """The skip summary of a make_dataset dataset, when it skipped anything."""
    import object_input as oi

    summary = oi.stats(dataset)
    if summary.total_skipped:
        print(summary.format())
        for offender in summary.offenders:
            print(f"  skipped {offender}")
