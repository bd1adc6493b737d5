"""Conversion on Apache Beam's DirectRunner against the local converter: images/s and ratio.

    python benchmarks/convert_beam.py [--images 240] [--height 480] [--width 640] [--rounds 3]
        [--workers 1 2] [--modes multi_threading]

A COCO set of JPEG crops of scikit-image's sample photographs (``bench`` extra; written as
``convert.py`` writes its set, 5 polygon masks per image) is converted with masks to 4 shards
by the local converter (threads) and by the same converter on the DirectRunner in each
``--modes`` running mode, with each number of ``--workers``, alternating within every round;
medians are reported with each one's ratio to the local converter with as many workers. A tiny
set (``--images-small``) run the same way gives the fixed cost of a conversion (reading,
ordering, starting the pipeline), so that time ≈ fixed + images × per-image cost. Every
candidate's shards are checked byte-identical. Needs the ``beam`` extra.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf
from convert import write_coco

from object_input.converters import convert_coco


def candidates(workers: list[int], modes: list[str]) -> dict[str, dict]:
    """Write options of each candidate by name: local threads, then Beam in each mode, for
    each worker count."""
    runs = {}
    for count in workers:
        runs[f"local x{count}"] = {"num_workers": count}
        for mode in modes:
            runs[f"beam {mode} x{count}"] = {
                "num_workers": count,
                "runner": "DirectRunner",
                "beam_options": f"--direct_running_mode={mode}",
            }
    return runs


def time_sets(
    sets: dict[str, str], runs: dict[str, dict], rounds: int, scratch: str
) -> dict[tuple[str, str], float]:
    """Median seconds per (set, candidate), candidates alternating in every round; checks that
    every candidate wrote the local converter's bytes."""
    seconds: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for set_name, json_path in sets.items():
            images = os.path.join(os.path.dirname(json_path), "images")
            written = {}
            for name, write in runs.items():
                output = os.path.join(scratch, set_name, name.replace(" ", "_"), "train")
                start = time.perf_counter()
                result = convert_coco(
                    json_path, images, output, num_shards=4, progress=False, **write
                )
                seconds.setdefault((set_name, name), []).append(time.perf_counter() - start)
                written[name] = [tf.io.gfile.GFile(p, "rb").read() for p in result.paths]
            first = next(iter(written.values()))
            assert all(w == first for w in written.values()), "a candidate wrote other bytes"
    return {key: statistics.median(values) for key, values in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=240, help="images in the timed set")
    parser.add_argument("--images-small", type=int, default=8, help="images in the tiny set")
    parser.add_argument("--height", type=int, default=480, help="image height")
    parser.add_argument("--width", type=int, default=640, help="image width")
    parser.add_argument("--rounds", type=int, default=3, help="timing rounds")
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1, 2], help="threads / Beam workers"
    )
    parser.add_argument(
        "--modes", nargs="+", default=["multi_threading"], help="DirectRunner running modes"
    )
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    runs = candidates(args.workers, args.modes)
    with tempfile.TemporaryDirectory() as tmp:
        sets = {
            size: write_coco(os.path.join(tmp, size), count, args.height, args.width, photos=True)
            for size, count in (("small", args.images_small), ("large", args.images))
        }
        medians = time_sets(sets, runs, args.rounds, tmp)
    print(
        f"COCO, {args.width}x{args.height} photograph crops, 5 polygon masks each, 4 shards; "
        f"{os.cpu_count()} CPUs; commit {commit}; medians of "
        f"{args.rounds} rounds"
    )
    extra = args.images - args.images_small
    for name, write in runs.items():
        large, small = medians[("large", name)], medians[("small", name)]
        local = medians[("large", f"local x{write['num_workers']}")]
        per_image = (large - small) / extra
        fixed = small - args.images_small * per_image
        print(
            f"  {name:<28s} {args.images / large:7.1f} images/s  x{local / large:.2f} vs local"
            f"   fixed {fixed:5.2f} s + {1000 * per_image:6.2f} ms/image"
        )


if __name__ == "__main__":
    main()
