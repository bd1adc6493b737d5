"""Write CIFAR-10 and CIFAR-100 binaries (the layout ``sources.CIFAR10``/``CIFAR100`` read)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import tensorflow as tf


def cifar_records(images: np.ndarray, *label_columns: Sequence[int]) -> bytes:
    """Records of label bytes (in the order given) then the R, G and B planes of each image."""
    images = np.asarray(images)
    if images.dtype != np.uint8 or images.shape[1:] != (32, 32, 3):
        raise ValueError(f"images must be uint8 [N, 32, 32, 3], got {images.dtype} {images.shape}")
    labels = np.stack([np.asarray(c) for c in label_columns], axis=1)
    if len(labels) != len(images) or labels.min(initial=0) < 0 or labels.max(initial=0) > 255:
        raise ValueError("labels must be one byte (0-255) per image in every label column")
    planes = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    return np.concatenate([labels.astype(np.uint8), planes], axis=1).tobytes()


def write_cifar10(path: str | os.PathLike, images: np.ndarray, labels: Sequence[int]) -> None:
    """Write ``images`` (uint8 ``[N, 32, 32, 3]``) and their labels as a CIFAR-10 binary."""
    with tf.io.gfile.GFile(os.fspath(path), "wb") as f:
        f.write(cifar_records(images, labels))


def write_cifar100(
    path: str | os.PathLike,
    images: np.ndarray,
    labels: Sequence[int],
    coarse_labels: Sequence[int],
) -> None:
    """Write images with fine ``labels`` and ``coarse_labels`` as a CIFAR-100 binary."""
    with tf.io.gfile.GFile(os.fspath(path), "wb") as f:
        f.write(cifar_records(images, coarse_labels, labels))
