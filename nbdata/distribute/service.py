"""``nd.experimental.service``: ``distribute`` under the name tf.data's service module
gives it, as a transformation for ``ds.apply``."""

from __future__ import annotations

from nbdata.distribute.node import validate


def distribute(processing_mode: str, service: str | None = None, job_name: str | None = None,
               consumer_index: int | None = None, num_consumers: int | None = None,
               num_workers: int | None = None):
    """A transformation for ``ds.apply`` (``tf.data.experimental.service.distribute``):
    ``ds.distribute(processing_mode, num_workers, address=service, ...)``, where
    ``service`` is the Ray address (None: this process's Ray, else a local one).
    Arguments are checked here, as tf.data checks them.

    >>> import nbdata as nd
    >>> nd.experimental.service.distribute("epochs")
    Traceback (most recent call last):
    ...
    nbdata.errors.InvalidArgumentError: distribute: processing_mode should be "parallel_epochs" or "distributed_epoch". Got 'epochs'.
    """
    validate(processing_mode, num_workers, service, job_name, consumer_index, num_consumers)

    def apply(ds):
        return ds.distribute(processing_mode, num_workers=num_workers, address=service,
                             job_name=job_name, consumer_index=consumer_index,
                             num_consumers=num_consumers)
    return apply
