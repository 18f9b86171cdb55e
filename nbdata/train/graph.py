"""TF1's graph vocabulary beyond what the recorder itself holds (``nbdata/trace``): the
names of the standard collections."""


class GraphKeys:
    """Names of the standard graph collections (``tf.GraphKeys``)."""

    QUEUE_RUNNERS = "queue_runners"
    LOCAL_VARIABLES = "local_variables"
    GLOBAL_VARIABLES = "variables"
    SAVEABLE_OBJECTS = "saveable_objects"


__all__ = ["GraphKeys"]
