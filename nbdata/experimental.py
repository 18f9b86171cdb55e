"""``nd.experimental``: names tf.data keeps under ``tf.data.experimental``."""

from nbdata.dataset import global_shuffle

__all__ = ["global_shuffle"]
