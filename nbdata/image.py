"""``nd.image``: TensorFlow's image ops on (H, W, C) NumPy images, each an op-table entry
defined in ``nbdata/primitives/image.py`` (JPEG coding in ``nbdata/primitives/jpeg.py``; PNG,
GIF and BMP decoding in ``nbdata/primitives/codecs.py``)."""

from nbdata.primitives.image import (adjust_brightness, adjust_contrast, adjust_saturation, cast,
                                     flip_left_right, hwc_to_chw, normalize, random_brightness,
                                     random_contrast, random_crop, random_flip_left_right,
                                     random_resized_crop, random_resized_crop_window, resize,
                                     rgb_to_grayscale, sample_distorted_bounding_box, transpose)
from nbdata.primitives.codecs import decode_bmp, decode_gif, decode_image, decode_png
from nbdata.primitives.jpeg import (decode_and_crop_jpeg, decode_jpeg, encode_jpeg,
                                    extract_jpeg_shape)

__all__ = ["adjust_brightness", "adjust_contrast", "adjust_saturation", "cast",
           "decode_and_crop_jpeg", "decode_bmp", "decode_gif", "decode_image", "decode_jpeg",
           "decode_png", "encode_jpeg", "extract_jpeg_shape", "flip_left_right", "hwc_to_chw",
           "normalize", "random_brightness", "random_contrast", "random_crop",
           "random_flip_left_right", "random_resized_crop", "random_resized_crop_window",
           "resize", "rgb_to_grayscale", "sample_distorted_bounding_box", "transpose"]
