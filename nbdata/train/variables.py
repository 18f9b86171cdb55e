"""Session-held variables, as far as the input pipeline needs them: the epoch counters of
``limit_epochs`` and the file list of ``match_filenames_once``, and the initializers
that set them (``local_variables_initializer``, ``global_variables_initializer``)."""

from __future__ import annotations

from typing import Any

from nbdata.errors import FailedPreconditionError
from nbdata.train.graph import GraphKeys
from nbdata.trace.graph import Operation, Tensor, as_tensor, get_default_graph


class Variable:
    """A value held by each session, set by running ``initializer`` (``tf.Variable``
    restricted to what input pipelines use). Reading it before that raises
    FailedPreconditionError, as TF1 does.

    >>> import numpy as np, nbdata as nd
    >>> v = nd.train.Variable(np.int64(5), name="v", collections=[nd.GraphKeys.LOCAL_VARIABLES])
    >>> sess = nd.Session()
    >>> sess.run(nd.local_variables_initializer())
    >>> int(sess.run(v.value()))
    5
    """

    def __init__(self, initial_value: Any, name: str | None = None, collections=None):
        graph = get_default_graph()
        init = as_tensor(initial_value, graph)
        self.graph = graph
        self.name = graph._op_name(name or "Variable")
        self.spec = init.spec
        self.initializer = Operation(graph, "Assign", f"{self.name}/Assign", [init],
                                     self._assign, [], kind="stateful")
        self._read = Operation(graph, "Identity", f"{self.name}/read", [], self._get,
                               [self.spec], kind="stateful").outputs[0]
        for c in (collections if collections is not None else [GraphKeys.GLOBAL_VARIABLES]):
            graph.add_to_collection(c, self)

    def _assign(self, run, values) -> None:
        run.session.variables[id(self)] = values[0]

    def _get(self, run, values) -> list:
        try:
            return [run.session.variables[id(self)]]
        except KeyError:
            raise FailedPreconditionError(
                f"Attempting to use uninitialized value {self.name}", self.name) from None

    def value(self) -> Tensor:
        """The tensor reading the variable's value."""
        return self._read

    def update(self, run, fn) -> Any:
        """Under the session's lock, replace the value with ``fn(value)`` (raises like a
        read when uninitialized); returns the old value."""
        with run.session._lock:
            old = self._get(run, [])[0]
            run.session.variables[id(self)] = fn(old)
            return old

    def __repr__(self) -> str:
        return f"<nd.train.Variable {self.name!r}>"


def group(ops: list, name: str | None = None) -> Operation:
    """One op that runs all of ``ops`` (``tf.group``)."""
    return Operation(get_default_graph(), "NoOp", name or "group_deps", [], None, [],
                     kind="stateful", control_inputs=tuple(ops))


def variables_initializer(var_list: list, name: str = "init") -> Operation:
    """An op that initializes each variable of ``var_list``."""
    return group([v.initializer for v in var_list], name)


def local_variables_initializer() -> Operation:
    """An op initializing the graph's local variables (the epoch counters of
    ``num_epochs``, ``match_filenames_once``): run it before starting queue runners
    whose producers count epochs, as in TF1."""
    return variables_initializer(get_default_graph().get_collection(GraphKeys.LOCAL_VARIABLES),
                                 "init_local")


def global_variables_initializer() -> Operation:
    """An op initializing the graph's global variables."""
    return variables_initializer(get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES),
                                 "init")


__all__ = ["Variable", "global_variables_initializer", "group", "local_variables_initializer",
           "variables_initializer"]
