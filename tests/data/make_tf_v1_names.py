"""What TensorFlow's ``tf.compat.v1`` gives, in graph mode, for the TF1 names
tests/compat/test_v1_names.py checks (image ops with TF1's semantics, array ops):

    python tests/data/make_tf_v1_names.py > tests/data/tf_v1_names.json

A case is ``[id, expression]``: Python source evaluated with ``tf`` and the inputs of
``inputs()``; a result is ``{dtype, shape, value}`` (nested lists). The test evaluates
the same source with ``tf = nbdata.compat.v1`` (on the values, and in a graph with
the inputs fed through placeholders), and compares with TensorFlow live when it is
importable."""

from __future__ import annotations

import json
import sys

import numpy as np


def inputs() -> dict:
    rs = np.random.RandomState(0)
    return {"img": rs.randint(0, 256, (7, 9, 3)).astype(np.uint8),
            "imgf": rs.rand(7, 9, 3).astype(np.float32),
            "boxes": np.array([[[0.1, 0.2, 0.8, 0.9], [0.0, 0.0, 1.0, 0.5]]], np.float32),
            "grid": np.arange(24).reshape(4, 6)}


CASES = [
    ["resize_up", "tf.image.resize_images(img, [13, 17])"],
    ["resize_down", "tf.image.resize_images(img, [4, 5])"],
    ["resize_align", "tf.image.resize_images(img, [13, 17], align_corners=True)"],
    ["resize_nearest", "tf.image.resize_images(img, [13, 17], method=tf.image.ResizeMethod.NEAREST_NEIGHBOR)"],
    ["resize_nearest_align", "tf.image.resize_images(img, [5, 4], method=1, align_corners=True)"],
    ["resize_same_size", "tf.image.resize_images(img, [7, 9])"],
    ["resize_float", "tf.image.resize(imgf, [10, 3])"],
    ["resize_preserve_aspect", "tf.image.resize_images(img, [20, 11], preserve_aspect_ratio=True)"],
    ["resize_preserve_aspect_nn", "tf.image.resize_images(imgf, [5, 30], method=1, preserve_aspect_ratio=True)"],
    ["resize_bilinear", "tf.image.resize_bilinear(img[None], [10, 11])"],
    ["resize_bilinear_align", "tf.image.resize_bilinear(imgf[None], [3, 20], align_corners=True)"],
    ["per_image_standardization", "tf.image.per_image_standardization(img)"],
    ["convert_u8_f32", "tf.image.convert_image_dtype(img, tf.float32)"],
    ["convert_f32_u8", "tf.image.convert_image_dtype(imgf, tf.uint8)"],
    ["convert_f32_u8_saturate", "tf.image.convert_image_dtype(imgf * 2 - 0.5, tf.uint8, saturate=True)"],
    ["convert_u8_i32", "tf.image.convert_image_dtype(img, tf.int32)"],
    ["central_crop", "tf.image.central_crop(img, 0.5)"],
    ["crop_or_pad", "tf.image.resize_image_with_crop_or_pad(img, 5, 12)"],
    ["crop_to_box", "tf.image.crop_to_bounding_box(img, 1, 2, 4, 5)"],
    ["pad_to_box", "tf.image.pad_to_bounding_box(img, 1, 2, 9, 12)"],
    ["adjust_hue_f32", "tf.image.adjust_hue(imgf, 0.3)"],
    ["adjust_hue_u8", "tf.image.adjust_hue(img, -0.45)"],
    ["flip_up_down", "tf.image.flip_up_down(img)"],
    ["draw_bounding_boxes", "tf.image.draw_bounding_boxes(imgf[None], boxes)"],
    ["strided_slice", "tf.strided_slice(grid, [1, 0], [3, 5], [1, 2])"],
    ["strided_slice_masks", "tf.strided_slice(grid, [1, 3], [0, 5], [1, 1], end_mask=1, shrink_axis_mask=2)"],
    ["split_sizes", "tf.split(grid, [1, -1, 2], axis=1)[1]"],
    ["split_even", "tf.split(grid, 2, axis=0)[1]"],
    ["decode_csv_int_default", "tf.decode_csv(['1,2.5,a'], [[1], [0.0], ['']])[0]"],
    ["decode_csv_float_default", "tf.decode_csv(['1,2.5,a'], [[1], [0.0], ['']])[1]"],
    ["rint", "tf.rint(imgf * 4 - 2)"],
    ["broadcast_to", "tf.broadcast_to(grid[0], [2, 6])"],
    ["convert_to_tensor", "tf.convert_to_tensor([1, 2, 3])"],
    ["cond_true", "tf.cond(tf.constant(True), lambda: grid * 2, lambda: grid)"],
    ["slice", "tf.slice(grid, [1, 2], [2, -1])"],
]


def encode(v) -> dict:
    arr = np.asarray(v)
    return {"dtype": arr.dtype.name, "shape": list(arr.shape), "value": arr.tolist()}


def tf_result(expression: str) -> dict:
    import tensorflow as tf_all
    tf = tf_all.compat.v1
    with tf.Graph().as_default(), tf.Session() as sess:
        return encode(sess.run(eval(expression, {"tf": tf, **inputs()})))


def main() -> None:
    import tensorflow as tf_all
    out = {"about": f"tf.compat.v1 in graph mode, TensorFlow {tf_all.__version__}; written by "
                    "tests/data/make_tf_v1_names.py",
           "cases": {name: tf_result(src) for name, src in CASES}}
    json.dump(out, sys.stdout, indent=0, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
