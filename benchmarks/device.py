"""Where the trailing steps run: per example, on the batch on the host, or on the device.

    python benchmarks/device.py [--images 128] [--rounds 3] [--images-set photos] [--size 512]
        [--rows "NAME;..."] [--host-only]

Photographs (scikit-image's, 640 × 480 JPEG) resized to 512 × 512, batches of 8, as
``benchmarks/ops.py`` runs them. Three parts, in one process:

1. Host: the pipeline's CPU ms per image with each heavy step (rotation, affine, blur, sharpness,
   RandAugment, AutoAugment v3, flip + rotation + blur + sharpness + brightness, and the YOLO
   recipe with its flip, affine and colour) per example (``trailing_steps="exact"``), on the
   batch in the pipeline (``"batched"``, the default) and moved to the device (``"device"``),
   against no steps; every pipeline built afresh each round, the rounds alternating the
   candidates. Then each row's added CPU per image on the batch against per example.
2. Device: :class:`object_input.keras.layers.DeviceAugmentation`'s time per image on one batch
   (compiled with XLA, on this process's default device), against the step's added host cost;
   and the same layer on Keras's JAX and PyTorch backends on the CPU (``jax.jit``,
   ``torch.compile``, each in a subprocess: Keras fixes its backend per process), on the same
   batch. Each skipped where its backend is not installed.
3. With an accelerator: images/s of the pipeline with rotation, blur and colour moved, the
   layer applied to each batch on the accelerator, against the pipeline with no steps (the floor).

Targets (issue 29): moved steps (rotation, affine, blur, sharpness, RandAugment) ≤ 1.15× no
steps on the host; the YOLO recipe moved ≤ 0.6× the same recipe on the host; the layer on CPU no
dearer per image than the host step; on an accelerator ≥ 0.9× the floor's images/s. Issue 39:
flip + rotation + blur + sharpness + brightness batched adds ≤ 0.45× the host CPU per image it
adds per example.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from common import IMAGE_SETS, cpu_seconds, interleaved_streams, report_streams
from speed import dataset_batches, standard_dataset

from object_input import fields, recipes
from object_input.ops._device_stage import DeviceStage

SIZE = 512
HEAVY: dict[str, list] = {
    "rotation": [("random_rotation", {"max_angle": 15.0})],
    "affine": [
        (
            "random_affine",
            {
                "max_rotation": 10.0,
                "max_shear": 5.0,
                "max_translation": 0.1,
                "scale_range": (0.9, 1.1),
            },
        )
    ],
    "blur": [("random_gaussian_blur", {"probability": 1.0})],
    "sharpness": [("random_sharpness", {"probability": 1.0})],
    "randaugment": [("randaugment_detection", {"num_layers": 2, "magnitude": 9})],
    "autoaugment v3": [("autoaugment_image", {"policy_name": "v3"})],
    "rotation, blur, colour": [
        ("random_rotation", {"max_angle": 15.0}),
        ("random_gaussian_blur", {"probability": 1.0}),
        "random_adjust_brightness",
        "random_adjust_saturation",
    ],
    "flip, rotation, blur, sharpness, brightness": [
        "random_horizontal_flip",
        ("random_rotation", {"max_angle": 15.0}),
        ("random_gaussian_blur", {"probability": 1.0}),
        ("random_sharpness", {"probability": 1.0}),
        "random_adjust_brightness",
    ],
}
#: The other Keras backends part 2 times the layer on, with their names in its table.
OTHER_BACKENDS = {"jax": "JAX", "torch": "PyTorch"}
YOLO = "yolo recipe"
FLOOR = "no steps"
STAGES = ("exact", "batched", "device")
# Issue 39's target: the batched row's added host CPU per image against the exact row's.
TARGET_ROW, TARGET = "flip, rotation, blur, sharpness, brightness", 0.45


def dataset(pattern: str, augment: list, stage: str, size: int = SIZE) -> tf.data.Dataset:
    """The benchmark pipeline: uint8 batches, as a pipeline feeding a device ships them."""
    return standard_dataset(
        pattern,
        8,
        steps=(),
        augment=augment,
        trailing_steps=stage,
        output_dtype="uint8",
        image_size=(size, size),
    )


def host_side(pattern: str, rows: dict[str, list], images: int, rounds: int, size: int) -> dict:
    """Median timings of every row on the host and moved, and of no steps."""
    candidates = {FLOOR: dataset_batches(lambda: dataset(pattern, [], "exact", size))}
    for name, augment in rows.items():
        for stage in STAGES:
            candidates[f"{name} [{stage}]"] = dataset_batches(
                lambda a=augment, s=stage: dataset(pattern, a, s, size)
            )
    for start in candidates.values():
        next(start())  # traces once, so that every timed build is warm
    results = interleaved_streams(candidates, rounds, images)
    report_streams(results, FLOOR)
    floor = results[FLOOR].cpu_s_per_image * 1000
    print(
        f"\n{'added host CPU ms/img':44s} {'exact':>7s} {'batched':>8s} {'device':>7s} "
        f"{'batched / exact':>16s}"
    )
    for name in rows:
        added = {s: results[f"{name} [{s}]"].cpu_s_per_image * 1000 - floor for s in STAGES}
        ratio = added["batched"] / added["exact"]
        target = f" (target ≤ {TARGET})" if name == TARGET_ROW else ""
        print(
            f"{name:44s} {added['exact']:7.2f} {added['batched']:8.2f} {added['device']:7.2f} "
            f"{ratio:16.2f}{target}"
        )
    return results


def time_per_image(apply, images, repeats: int) -> tuple[float, float]:
    """(wall, CPU) ms per image of ``apply()`` (after one warm-up call) on a batch ``images``."""
    apply()
    wall, cpu = time.perf_counter(), cpu_seconds()
    for _ in range(repeats):
        apply()
    count = repeats * int(images.shape[0])
    return (
        (time.perf_counter() - wall) * 1000 / count,
        (cpu_seconds() - cpu) * 1000 / count,
    )


def layer_time(batch: dict, augment: list, repeats: int) -> tuple[float, float]:
    """(wall, CPU) ms per image of the compiled device stage of ``augment`` on one batch."""
    stage = DeviceStage.required(augment, "benchmark")
    images, parameters = batch[fields.IMAGE], batch[fields.DEVICE_PARAMETERS]
    compiled = tf.function(stage.__call__, jit_compile=True, autograph=False)
    return time_per_image(lambda: compiled(images, parameters).numpy(), images, repeats)


def other_layer_times(
    keras_backend: str, batches: dict[str, dict], rows: dict[str, list], repeats: int
) -> dict:
    """(wall, CPU) ms per image of the layer on Keras's ``keras_backend`` ("jax", "torch") on
    the CPU, by row name (empty when that backend is not installed): a subprocess times the same
    batches, as Keras fixes its backend per process."""
    try:
        __import__(keras_backend)
    except ImportError:
        return {}
    with tempfile.TemporaryDirectory() as directory:
        arrays = {}
        for index, name in enumerate(rows):
            arrays[f"images_{index}"] = batches[name][fields.IMAGE].numpy()
            arrays[f"parameters_{index}"] = batches[name][fields.DEVICE_PARAMETERS].numpy()
        np.savez(os.path.join(directory, "batches.npz"), **arrays)
        with open(os.path.join(directory, "rows.json"), "w") as file:
            json.dump({"rows": list(rows.items()), "repeats": repeats}, file)
        env = {
            **os.environ,
            "KERAS_BACKEND": keras_backend,
            "JAX_PLATFORMS": "cpu",
            "CUDA_VISIBLE_DEVICES": "",
        }
        worker = [sys.executable, __file__, "--worker", directory]
        subprocess.run(worker, env=env, check=True)
        with open(os.path.join(directory, "times.json")) as file:
            return json.load(file)


def worker(directory: str) -> None:
    """The subprocess of :func:`other_layer_times`: each row's layer as it compiles on this
    backend (``jax.jit``, ``torch.compile``), timed after its first, compiling, call."""
    import keras

    from object_input.keras.layers import DeviceAugmentation

    with open(os.path.join(directory, "rows.json")) as file:
        spec = json.load(file)
    arrays = np.load(os.path.join(directory, "batches.npz"))
    times = {}
    for index, (name, augment) in enumerate(spec["rows"]):
        layer = DeviceAugmentation(augment)
        images, parameters = arrays[f"images_{index}"], arrays[f"parameters_{index}"]
        times[name] = time_per_image(
            lambda f=layer, x=(images, parameters): keras.ops.convert_to_numpy(f(x, training=True)),
            images,
            spec["repeats"],
        )
    with open(os.path.join(directory, "times.json"), "w") as file:
        json.dump(times, file)


def device_side(pattern: str, rows: dict[str, list], host: dict, repeats: int, size: int) -> None:
    floor = host[FLOOR].cpu_s_per_image * 1000
    batches = {name: next(iter(dataset(pattern, a, "device", size))) for name, a in rows.items()}
    others = {name: other_layer_times(name, batches, rows, repeats) for name in OTHER_BACKENDS}
    print(
        f"\n{'device stage':28s} {'layer ms/img':>13s} {'layer CPU ms/img':>17s} "
        f"{'host step +CPU ms/img':>22s} {'layer CPU / host':>17s}"
        + "".join(f" {label + ' layer CPU ms/img':>23s}" for label in OTHER_BACKENDS.values())
    )
    for name, augment in rows.items():
        wall, cpu = layer_time(batches[name], augment, repeats)
        added = host[f"{name} [exact]"].cpu_s_per_image * 1000 - floor
        other = "".join(
            f" {others[b][name][1]:23.2f}" if name in others[b] else f" {'(no ' + b + ')':>23s}"
            for b in OTHER_BACKENDS
        )
        print(f"{name:28s} {wall:13.2f} {cpu:17.2f} {added:22.2f} {cpu / added:17.2f}{other}")
    print(
        f"(device: {tf.config.list_logical_devices()[-1].name}; layer times on one batch of 8; "
        "JAX, PyTorch: Keras's backend on the CPU, jax.jit, torch.compile)"
    )


def accelerator_side(pattern: str, augment: list, images: int, size: int) -> None:
    """Images/s of the pipeline plus the layer on the accelerator, against the floor."""
    if not tf.config.list_physical_devices("GPU"):
        print("\naccelerator: none here; part 3 runs where one is")
        return
    stage = tf.function(
        DeviceStage.required(augment, "benchmark").__call__, jit_compile=True, autograph=False
    )

    def rate(make, apply) -> float:
        batches = iter(make())
        apply(next(batches))
        began, seen = time.perf_counter(), 0
        for batch in batches:
            apply(batch)
            seen += int(batch[fields.IMAGE].shape[0])
            if seen >= images:
                break
        return seen / (time.perf_counter() - began)

    with tf.device("/GPU:0"):
        floor = rate(
            lambda: dataset(pattern, [], "exact", size),
            lambda b: tf.cast(b[fields.IMAGE], tf.float32).numpy(),
        )
        moved = rate(
            lambda: dataset(pattern, augment, "device", size),
            lambda b: stage(b[fields.IMAGE], b[fields.DEVICE_PARAMETERS]).numpy(),
        )
    print(
        f"\naccelerator: floor {floor:.1f} images/s, pipeline + layer {moved:.1f} images/s, "
        f"{moved / floor:.2f}x the floor (target ≥ 0.9)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--images-set", choices=sorted(IMAGE_SETS), default="photos")
    parser.add_argument("--data", default="/tmp/object_input_bench")
    parser.add_argument("--size", type=int, default=SIZE, help="output image side (square)")
    parser.add_argument("--rows", help="rows to run, separated by ';' (default: all)")
    parser.add_argument("--host-only", action="store_true", help="part 1 alone")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    pattern = IMAGE_SETS[args.images_set](os.path.join(args.data, args.images_set))
    rows = {**HEAVY, YOLO: recipes.yolo(args.size)}
    if args.rows:
        rows = {name: rows[name] for name in args.rows.split(";")}
    print(f"host side: {args.images_set}, {args.images} images x {args.rounds} rounds")
    host = host_side(pattern, rows, args.images, args.rounds, args.size)
    if args.host_only:
        return
    heavy = {name: augment for name, augment in HEAVY.items() if name in rows}
    device_side(pattern, heavy, host, args.repeats, args.size)
    accelerator_side(pattern, HEAVY["rotation, blur, colour"], 4 * args.images, args.size)


if __name__ == "__main__":
    main()
