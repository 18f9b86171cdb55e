"""Running a dataset on Ray workers (``ds.distribute``): the plan node, splits, the job
and worker actors, and the consumer. Ray is imported only when a dataset runs here."""

from nbdata.distribute.node import distribute_node  # noqa: F401 - ds.distribute's node (nbdata/plugins.py)
