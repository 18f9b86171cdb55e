"""``nd.experimental``: names tf.data keeps under ``tf.data.experimental``."""

from types import SimpleNamespace

from nbdata.dataset import global_shuffle


def prefetch_to_device(device: str, buffer_size=None):
    """A transformation for ``ds.apply``: ``ds.prefetch_to_device(device, buffer_size)``
    (``tf.data.experimental.prefetch_to_device``; ``buffer_size`` None: 2)."""
    return lambda ds: ds.prefetch_to_device(device, 2 if buffer_size is None else buffer_size)


def copy_to_device(target_device: str, source_device: str = "/cpu:0"):
    """A transformation for ``ds.apply`` copying each element to ``target_device``
    (``tf.data.experimental.copy_to_device``): ``prefetch_to_device`` with one batch of
    buffer. ``source_device`` must be the CPU."""
    if str(source_device).strip().lower().lstrip("/") not in ("cpu:0", "cpu", "device:cpu:0"):
        raise ValueError(f"copy_to_device: the source device must be the CPU, got {source_device!r}")
    return lambda ds: ds.prefetch_to_device(target_device, 1)


def _service_distribute(processing_mode: str, service: str | None = None,
                        job_name: str | None = None, consumer_index: int | None = None,
                        num_consumers: int | None = None, num_workers: int | None = None):
    """A transformation for ``ds.apply`` (``tf.data.experimental.service.distribute``):
    ``ds.distribute(processing_mode, num_workers, address=service, ...)``; ``service``
    is the Ray address (None: this process's Ray, else a local one)."""
    def apply(ds):
        return ds.distribute(processing_mode, num_workers=num_workers, address=service,
                             job_name=job_name, consumer_index=consumer_index,
                             num_consumers=num_consumers)
    from nbdata.distribute.node import validate
    validate(processing_mode, num_workers, service, job_name, consumer_index, num_consumers)
    return apply


service = SimpleNamespace(distribute=_service_distribute)
"""``nd.experimental.service``: ``distribute`` as tf.data's service module has it."""

__all__ = ["copy_to_device", "global_shuffle", "prefetch_to_device", "service"]
