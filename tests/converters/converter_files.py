"""Files the converter tests share: random images, VOC annotations, reading the records back."""

import numpy as np
import tensorflow as tf

from object_input import decode_example, fields

QUIET = {"progress": False}


def random_image(rng, height, width):
    return rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)


def save_image(path, image):
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".png":
        path.write_bytes(tf.io.encode_png(image).numpy())
    else:
        path.write_bytes(tf.io.encode_jpeg(image, quality=90).numpy())
    return path


def image_pixels(path):
    return tf.io.decode_image(path.read_bytes(), channels=3).numpy()


def read_records(paths, **options):
    """``{source_id: (decoded numpy dict, tf.train.Example)}`` of every record in ``paths``."""
    records = {}
    for path in paths:
        for serialized in tf.data.TFRecordDataset(path):
            decoded = decode_example(serialized, **options)
            example = tf.train.Example.FromString(serialized.numpy())
            source_id = decoded[fields.SOURCE_ID].numpy().decode()
            assert source_id not in records
            records[source_id] = ({k: v.numpy() for k, v in decoded.items()}, example)
    return records


def feature_values(example, key):
    feature = example.features.feature[key]
    kind = feature.WhichOneof("kind")
    return list(getattr(feature, kind).value) if kind else []


def voc_xml(filename, width, height, objects):
    parts = [f"<annotation><filename>{filename}</filename>"]
    parts.append(f"<size><width>{width}</width><height>{height}</height><depth>3</depth></size>")
    for name, box, difficult, truncated, pose in objects:
        xmin, ymin, xmax, ymax = box
        parts.append(
            f"<object><name>{name}</name><pose>{pose}</pose><truncated>{truncated}</truncated>"
            f"<difficult>{difficult}</difficult><bndbox><xmin>{xmin}</xmin><ymin>{ymin}</ymin>"
            f"<xmax>{xmax}</xmax><ymax>{ymax}</ymax></bndbox></object>"
        )
    return "".join(parts) + "</annotation>"


VOC = {
    "000001": (
        "000001.jpg",
        32,
        24,
        [
            ("dog", (3, 4, 20, 22), 0, 1, "Left"),
            ("cat", (10, 1, 31, 12), 1, 0, "Frontal"),
        ],
    ),
    "000002": ("000002.png", 16, 20, [("person", (1, 2, 15, 19), 0, 0, "Unspecified")]),
    "000003": ("000003.png", 10, 10, []),
}
VOC_EXTRA = {
    "image/object/truncated": tf.io.VarLenFeature(tf.int64),
    "image/object/view": tf.io.VarLenFeature(tf.string),
}


def write_file(path, text):
    path.write_text(text)
    return path
