"""The learned detection AutoAugment policies v0–v3 (Zoph et al. 2019), as the paper's code
ships them.

A policy is a list of sub-policies; each sub-policy is a list of ``(op name, probability, level)``
with level 0–10 (the op names are :data:`object_input.ops._policy_engine.OP_NAMES`).
"""

POLICIES: dict[str, tuple[tuple[tuple[str, float, int], ...], ...]] = {
    # The policy used for every result in the paper.
    "v0": (
        (("TranslateX_BBox", 0.6, 4), ("Equalize", 0.8, 10)),
        (("TranslateY_Only_BBoxes", 0.2, 2), ("Cutout", 0.8, 8)),
        (("Sharpness", 0.0, 8), ("ShearX_BBox", 0.4, 0)),
        (("ShearY_BBox", 1.0, 2), ("TranslateY_Only_BBoxes", 0.6, 6)),
        (("Rotate_BBox", 0.6, 10), ("Color", 1.0, 6)),
    ),
    "v1": (
        (("TranslateX_BBox", 0.6, 4), ("Equalize", 0.8, 10)),
        (("TranslateY_Only_BBoxes", 0.2, 2), ("Cutout", 0.8, 8)),
        (("Sharpness", 0.0, 8), ("ShearX_BBox", 0.4, 0)),
        (("ShearY_BBox", 1.0, 2), ("TranslateY_Only_BBoxes", 0.6, 6)),
        (("Rotate_BBox", 0.6, 10), ("Color", 1.0, 6)),
        (("Color", 0.0, 0), ("ShearX_Only_BBoxes", 0.8, 4)),
        (("ShearY_Only_BBoxes", 0.8, 2), ("Flip_Only_BBoxes", 0.0, 10)),
        (("Equalize", 0.6, 10), ("TranslateX_BBox", 0.2, 2)),
        (("Color", 1.0, 10), ("TranslateY_Only_BBoxes", 0.4, 6)),
        (("Rotate_BBox", 0.8, 10), ("Contrast", 0.0, 10)),
        (("Cutout", 0.2, 2), ("Brightness", 0.8, 10)),
        (("Color", 1.0, 6), ("Equalize", 1.0, 2)),
        (("Cutout_Only_BBoxes", 0.4, 6), ("TranslateY_Only_BBoxes", 0.8, 2)),
        (("Color", 0.2, 8), ("Rotate_BBox", 0.8, 10)),
        (("Sharpness", 0.4, 4), ("TranslateY_Only_BBoxes", 0.0, 4)),
        (("Sharpness", 1.0, 4), ("SolarizeAdd", 0.4, 4)),
        (("Rotate_BBox", 1.0, 8), ("Sharpness", 0.2, 8)),
        (("ShearY_BBox", 0.6, 10), ("Equalize_Only_BBoxes", 0.6, 8)),
        (("ShearX_BBox", 0.2, 6), ("TranslateY_Only_BBoxes", 0.2, 10)),
        (("SolarizeAdd", 0.6, 8), ("Brightness", 0.8, 10)),
    ),
    "v2": (
        (("Color", 0.0, 6), ("Cutout", 0.6, 8), ("Sharpness", 0.4, 8)),
        (("Rotate_BBox", 0.4, 8), ("Sharpness", 0.4, 2), ("Rotate_BBox", 0.8, 10)),
        (("TranslateY_BBox", 1.0, 8), ("AutoContrast", 0.8, 2)),
        (("AutoContrast", 0.4, 6), ("ShearX_BBox", 0.8, 8), ("Brightness", 0.0, 10)),
        (("SolarizeAdd", 0.2, 6), ("Contrast", 0.0, 10), ("AutoContrast", 0.6, 0)),
        (("Cutout", 0.2, 0), ("Solarize", 0.8, 8), ("Color", 1.0, 4)),
        (("TranslateY_BBox", 0.0, 4), ("Equalize", 0.6, 8), ("Solarize", 0.0, 10)),
        (("TranslateY_BBox", 0.2, 2), ("ShearY_BBox", 0.8, 8), ("Rotate_BBox", 0.8, 8)),
        (("Cutout", 0.8, 8), ("Brightness", 0.8, 8), ("Cutout", 0.2, 2)),
        (("Color", 0.8, 4), ("TranslateY_BBox", 1.0, 6), ("Rotate_BBox", 0.6, 6)),
        (("Rotate_BBox", 0.6, 10), ("BBox_Cutout", 1.0, 4), ("Cutout", 0.2, 8)),
        (("Rotate_BBox", 0.0, 0), ("Equalize", 0.6, 6), ("ShearY_BBox", 0.6, 8)),
        (("Brightness", 0.8, 8), ("AutoContrast", 0.4, 2), ("Brightness", 0.2, 2)),
        (("TranslateY_BBox", 0.4, 8), ("Solarize", 0.4, 6), ("SolarizeAdd", 0.2, 10)),
        (("Contrast", 1.0, 10), ("SolarizeAdd", 0.2, 8), ("Equalize", 0.2, 4)),
    ),
    "v3": (
        (("Posterize", 0.8, 2), ("TranslateX_BBox", 1.0, 8)),
        (("BBox_Cutout", 0.2, 10), ("Sharpness", 1.0, 8)),
        (("Rotate_BBox", 0.6, 8), ("Rotate_BBox", 0.8, 10)),
        (("Equalize", 0.8, 10), ("AutoContrast", 0.2, 10)),
        (("SolarizeAdd", 0.2, 2), ("TranslateY_BBox", 0.2, 8)),
        (("Sharpness", 0.0, 2), ("Color", 0.4, 8)),
        (("Equalize", 1.0, 8), ("TranslateY_BBox", 1.0, 8)),
        (("Posterize", 0.6, 2), ("Rotate_BBox", 0.0, 10)),
        (("AutoContrast", 0.6, 0), ("Rotate_BBox", 1.0, 6)),
        (("Equalize", 0.0, 4), ("Cutout", 0.8, 10)),
        (("Brightness", 1.0, 2), ("TranslateY_BBox", 1.0, 6)),
        (("Contrast", 0.0, 2), ("ShearY_BBox", 0.8, 0)),
        (("AutoContrast", 0.8, 10), ("Contrast", 0.2, 10)),
        (("Rotate_BBox", 1.0, 10), ("Cutout", 1.0, 10)),
        (("SolarizeAdd", 0.8, 6), ("Equalize", 0.8, 8)),
    ),
}
