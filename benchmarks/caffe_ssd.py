"""Speed of Caffe SSD's AnnotatedData transform beside the standard pipeline and the Object
Detection API's ``ssd_random_crop`` recipe it resembles.

    PYTHONPATH=. python benchmarks/caffe_ssd.py [--images 320] [--rounds 3] [--set noisy]

Every row is ``make_dataset`` over the same JPEG records (``--set``: "noisy", generated 640×480
shapes on noise, or "photos", which needs the ``bench`` extra), batches of 8, 300 × 300 out
(MobileNet-SSD's input), rounds alternating, medians reported:

- no steps: decode and resize to 300 × 300;
- standard: flip, crop, brightness, contrast, hue, saturation (``benchmarks/speed.py``'s);
- OD API SSD recipe: ``random_horizontal_flip`` and ``ssd_random_crop`` (the Object Detection
  API's SSD configs), then the resize, which decodes only the crop's window (``defer_decode``);
  the same decoding the whole image (as every Caffe row does: its colour step comes first, and
  its expanded windows leave the image); and with ``random_distort_color`` first;
- Caffe SSD: MobileNet-SSD's train prototxt as ``load_data_layer`` gives it: ``caffe_ssd_distort``,
  ``caffe_ssd_sample`` (expansion up to 4×, the seven samplers), ``caffe_ssd_resize`` (five
  interpolations) and ``caffe_transform`` (mirror, mean 127.5, scale); the same without
  ``distort_param``; and without ``expand_param`` either.

The Caffe rows resize in their own step, so they pad to 300 × 300 (a no-op) instead of resizing
at the end.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import speed
from common import IMAGE_SETS, interleaved_streams, report_streams

import object_input as oi
from object_input.ops.caffe_ssd import SSD_BATCH_SAMPLERS

SIZE = (300, 300)
BASELINE = "no steps"
# MobileNet-SSD's MobileNetSSD_train.prototxt, as load_data_layer turns it into steps.
MOBILENET_SSD_DISTORT = (
    "caffe_ssd_distort",
    {
        "brightness_prob": 0.5,
        "brightness_delta": 32.0,
        "contrast_prob": 0.5,
        "contrast_lower": 0.5,
        "contrast_upper": 1.5,
        "hue_prob": 0.5,
        "hue_delta": 18.0,
        "saturation_prob": 0.5,
        "saturation_lower": 0.5,
        "saturation_upper": 1.5,
        "random_order_prob": 0.0,
    },
)
MOBILENET_SSD_SAMPLE = {"batch_samplers": list(SSD_BATCH_SAMPLERS), "emit_type": "CENTER"}
MOBILENET_SSD_EXPAND = {"expand_prob": 0.5, "max_expand_ratio": 4.0, "mean_value": [127.5] * 3}
MOBILENET_SSD_GEOMETRY = (
    ("caffe_ssd_sample", {**MOBILENET_SSD_SAMPLE, **MOBILENET_SSD_EXPAND}),
    (
        "caffe_ssd_resize",
        {
            "height": SIZE[0],
            "width": SIZE[1],
            "interp_mode": ["LINEAR", "AREA", "NEAREST", "CUBIC", "LANCZOS4"],
        },
    ),
    ("caffe_transform", {"mirror": True, "mean_value": [127.5] * 3, "scale": 0.007843}),
)


def rows(pattern: str) -> dict:
    """Each row's starter for :func:`common.time_stream`."""

    def resized(augment: list, **options):
        return speed.dataset_batches(
            lambda: speed.standard_dataset(pattern, 8, image_size=SIZE, augment=augment, **options)
        )

    def own_resize(augment: list):
        return speed.dataset_batches(
            lambda: speed.standard_dataset(
                pattern, 8, image_size=None, pad_image_size=SIZE, augment=augment
            )
        )

    od_api = ["random_horizontal_flip", "ssd_random_crop"]
    return {
        BASELINE: resized([]),
        "standard": resized(list(speed.STANDARD_STEPS)),
        "OD API SSD recipe (flip, ssd_random_crop)": resized(od_api),
        "OD API SSD recipe, whole image decoded": resized(
            od_api, decoding=oi.DecodeOptions(trust_manifest=False, defer_decode=False)
        ),
        "OD API SSD recipe + random_distort_color": resized(["random_distort_color", *od_api]),
        "Caffe SSD (MobileNet-SSD prototxt)": own_resize(
            [MOBILENET_SSD_DISTORT, *MOBILENET_SSD_GEOMETRY]
        ),
        "Caffe SSD without distort_param": own_resize(list(MOBILENET_SSD_GEOMETRY)),
        "Caffe SSD without distort_param, expand_param": own_resize(
            [("caffe_ssd_sample", MOBILENET_SSD_SAMPLE), *MOBILENET_SSD_GEOMETRY[1:]]
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--images", type=int, default=320, help="images per row and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--set", choices=sorted(IMAGE_SETS), default="noisy")
    parser.add_argument("--data", default="/tmp/oi-bench")
    args = parser.parse_args()
    began = time.perf_counter()
    pattern = IMAGE_SETS[args.set](args.data)
    candidates = rows(pattern)
    for start in candidates.values():
        next(start())  # traces each pipeline once, so that the timed builds are warm
    results = interleaved_streams(candidates, args.rounds, args.images)
    report_streams(results, BASELINE)
    print(f"\n({args.images} images × {args.rounds} rounds, {time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
