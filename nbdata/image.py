"""``nd.image``: TensorFlow's image ops on (H, W, C) NumPy images, each an op-table entry
defined in ``nbdata/primitives/image.py`` (JPEG coding in ``nbdata/primitives/jpeg.py``; PNG,
GIF and BMP decoding in ``nbdata/primitives/codecs.py``)."""

from nbdata.primitives.image import (adjust_brightness, adjust_contrast, adjust_saturation, cast,
                                     flip_left_right, hwc_to_chw, normalize, random_brightness,
                                     random_contrast, random_crop, random_flip_left_right,
                                     random_resized_crop, random_resized_crop_window, resize,
                                     rgb_to_grayscale, transpose)
from nbdata.primitives.codecs import decode_bmp, decode_gif, decode_image, decode_png
from nbdata.primitives.jpeg import decode_jpeg, encode_jpeg

__all__ = ["adjust_brightness", "adjust_contrast", "adjust_saturation", "cast", "decode_bmp",
           "decode_gif", "decode_image", "decode_jpeg", "decode_png", "encode_jpeg",
           "flip_left_right", "hwc_to_chw", "normalize", "random_brightness", "random_contrast", "random_crop", "random_flip_left_right", "random_resized_crop",
           "random_resized_crop_window", "resize", "rgb_to_grayscale", "transpose"]
