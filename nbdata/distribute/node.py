"""``distribute``: the plan node whose input runs on Ray workers, and the validation of
its arguments (as ``tf.data.experimental.service.distribute`` validates them)."""

from __future__ import annotations

import dataclasses
import operator
from typing import Any

from nbdata.errors import InvalidArgumentError
from nbdata.ops.node import INFINITE, UNKNOWN, Node, UnaryNode, arg_field, new_resource_key

PARALLEL_EPOCHS = "parallel_epochs"
DISTRIBUTED_EPOCH = "distributed_epoch"


def _invalid(what: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"distribute: {what}", "distribute")


def _count(value: Any, name: str, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"distribute: {name} must be an int, got a bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"distribute: {name} must be an int, got {type(value).__name__}") from None
    if value < minimum:
        raise _invalid(f"{name} must be >= {minimum}, got {value}")
    return value


def validate(processing_mode: Any, num_workers: Any, address: Any, job_name: Any,
             consumer_index: Any, num_consumers: Any) -> dict:
    """The checked arguments; ValueError (InvalidArgumentError) or TypeError as tf.data
    raises them for a bad mode, a half-given consumer pair, a consumer pair without
    ``job_name``, or an empty job name."""
    if processing_mode not in (PARALLEL_EPOCHS, DISTRIBUTED_EPOCH):
        raise _invalid("processing_mode should be \"parallel_epochs\" or \"distributed_epoch\". "
                       f"Got {processing_mode!r}.")
    if (consumer_index is None) != (num_consumers is None):
        raise _invalid("must either set both `consumer_index` and `num_consumers`, or neither. "
                       f"consumer_index={consumer_index}, num_consumers={num_consumers}")
    if num_consumers is not None and job_name is None:
        raise _invalid("`job_name` must be set when setting `num_consumers`. "
                       f"num_consumers was set to {num_consumers}.")
    if job_name is not None:
        if not isinstance(job_name, str):
            raise _invalid(f"`job_name` must be a string, but `job_name` was of type "
                           f"{type(job_name).__name__}. job_name={job_name!r}")
        if not job_name:
            raise _invalid("`job_name` must not be empty")
    if address is not None and (not isinstance(address, str) or not address):
        raise _invalid(f"address must be a non-empty string (a Ray address), got {address!r}")
    num_consumers = _count(num_consumers, "num_consumers", 1)
    consumer_index = _count(consumer_index, "consumer_index", 0)
    if consumer_index is not None and consumer_index >= num_consumers:
        raise _invalid(f"consumer_index must be < num_consumers ({num_consumers}), got "
                       f"{consumer_index}")
    return {"processing_mode": processing_mode, "num_workers": _count(num_workers, "num_workers", 1),
            "address": address, "job_name": job_name, "consumer_index": consumer_index,
            "num_consumers": num_consumers}


@dataclasses.dataclass(frozen=True, eq=False)
class Distribute(UnaryNode):
    """``input`` runs in Ray worker actors, compiled there; this node, at the driver,
    hands out the chunks they finish. ``source`` is the split source below ``input``
    (``distributed_epoch``) or None. Its seed gives every worker its own (derived);
    its iteration number makes workers reshuffle each iteration."""

    processing_mode: str = arg_field()
    # Where and on how many workers (and consumers) the dataset runs is not part of it:
    # a saved position restores on another cluster, worker count or consumer count
    # (the consumer checks what a processing mode cannot re-split).
    num_workers: int | None = dataclasses.field(metadata={"show": True, "identity": False})
    address: str | None = dataclasses.field(metadata={"show": True, "identity": False})
    job_name: str | None = arg_field()
    consumer_index: int | None = dataclasses.field(metadata={"show": True, "identity": False})
    num_consumers: int | None = dataclasses.field(metadata={"show": True, "identity": False})
    options: Any = dataclasses.field(default=None, compare=False, repr=False)
    source: Node | None = dataclasses.field(default=None, compare=False, repr=False)
    seed: Any = None
    resource_key: int = dataclasses.field(default_factory=new_resource_key, compare=False)
    service_key: int = dataclasses.field(default_factory=new_resource_key, compare=False)
    op = "distribute"
    seeded = True

    def cardinality(self) -> int:
        return INFINITE if self.input.cardinality() == INFINITE else UNKNOWN

    def describe(self) -> str:
        args = [f"processing_mode={self.processing_mode!r}",
                f"num_workers={self.num_workers if self.num_workers else 'all CPUs'}"]
        for name in ("address", "job_name", "consumer_index", "num_consumers"):
            if getattr(self, name) is not None:
                args.append(f"{name}={getattr(self, name)!r}")
        return f"{self.label}({', '.join(args)}) <- Ray workers run: {_chain(self.input)}"

    def title(self) -> str:
        return f"{self.label}({self.processing_mode})"

    def lowered_inputs(self, lower) -> Node:
        # The input is planned and compiled by each worker, not at the driver.
        return DistributedStage(self)

    def fingerprint(self) -> str:
        from nbdata.compiler.plan_identity import plan_fingerprint
        return plan_fingerprint(self.input)

    def open_chunks(self, ctx, state=None):
        return DistributedStage(self).open_chunks(ctx, state)


@dataclasses.dataclass(frozen=True, eq=False)
class DistributedStage(Node):
    """``distribute`` in a physical plan: a source, as far as the driver is concerned,
    of the chunks the workers finish (its input is planned by the workers)."""

    node: Distribute
    op = "distribute"

    @property
    def spec(self):
        return self.node.spec

    def cardinality(self) -> int:
        return self.node.cardinality()

    def describe(self) -> str:
        return self.node.describe()

    def title(self) -> str:
        return self.node.title()

    def open_chunks(self, ctx, state=None):
        from nbdata.distribute.consumer import DistributedChunks
        return DistributedChunks(self.node, ctx, state, self)

    def explain_lines(self) -> list:
        """For ``explain()``: what runs at the driver and what each worker runs."""
        from nbdata.dataset import Dataset
        from nbdata.distribute.splits import SplitSource, replace_node
        node, source = self.node.input, self.node.source
        if source is not None:
            node = replace_node(node, source, SplitSource(source, lambda key, k: None))
        worker_plan = str(Dataset(node, self.node.options).compile().explain())
        how = ("each runs the whole dataset with its own seed (parallel_epochs)"
               if source is None else
               f"each runs the ops over the splits of {source.describe()} the job hands "
               "it (distributed_epoch: each element once per epoch)")
        lines = [f"  driver: {self.title()} reads finished chunks from the Ray object store "
                 "and runs the ops above it",
                 f"  workers ({self.node.num_workers or 'one per CPU of the cluster'}): {how}; "
                 "each compiles this plan:"]
        lines += ["    " + line for line in worker_plan.splitlines()]
        return lines


def _chain(node: Node) -> str:
    """The logical ops of a plan, source first, in one line."""
    ops = [node.label]
    while len(node.inputs) == 1:
        node = node.inputs[0]
        ops.append(node.label)
    return " -> ".join(reversed(ops))


def distribute_node(node: Node, options, processing_mode: str, num_workers, address, job_name,
                    consumer_index, num_consumers, name) -> Distribute:
    """The node of ``ds.distribute(...)`` (see ``nbdata.dataset.Dataset.distribute``)."""
    from nbdata import random as nd_random
    from nbdata.distribute.cluster import ray_module
    from nbdata.distribute.splits import splittable_source
    args = validate(processing_mode, num_workers, address, job_name, consumer_index,
                    num_consumers)
    ray_module()
    if (args["num_consumers"] is not None and processing_mode == PARALLEL_EPOCHS
            and node.cardinality() >= 0):
        # distributed_epoch reads a finite epoch in coordinated rounds too: the workers'
        # last elements are dealt out one per consumer (see Job._coordinated).
        raise _invalid("coordinated reads (num_consumers) need an infinite dataset, so that "
                       "no worker runs out of data before the others; add .repeat()")
    source = splittable_source(node) if processing_mode == DISTRIBUTED_EPOCH else None
    return Distribute(node, **args, options=options, source=source,
                      seed=nd_random.op_seed(None), name=name)
