"""``nd.train``: TF1-style training utilities; here, saving iterator state with ``Saver``."""

from nbdata.train.saver import Saver

__all__ = ["Saver"]
