"""``nd.train.Saver`` and ``nd.make_saveable_from_iterator``: TF1-shaped iterator checkpoints."""

from __future__ import annotations

import os

from nbdata import checkpoint
from nbdata.errors import InvalidArgumentError, NotFoundError


class SaveableIterator:
    """An iterator wrapped for :class:`Saver` (``nd.make_saveable_from_iterator(it)``)."""

    def __init__(self, iterator, name: str | None = None):
        from nbdata.iterator import Iterator
        from nbdata.train.iterators import GraphIterator
        if not isinstance(iterator, (Iterator, GraphIterator)):
            raise TypeError(f"make_saveable_from_iterator: expected an nd.Iterator, got "
                            f"{type(iterator).__name__}")
        self.iterator = iterator
        self.name = name

    def save(self, sess) -> bytes:
        """The iterator's position (in ``sess`` for a graph-mode iterator)."""
        if hasattr(self.iterator, "runtime"):
            return self.iterator.save(_session(sess, self.iterator))
        return self.iterator.save()

    def restore(self, sess, state: bytes) -> None:
        if hasattr(self.iterator, "runtime"):
            self.iterator.restore(_session(sess, self.iterator), state)
        else:
            self.iterator.restore(state)


def _session(sess, iterator):
    """The session a graph-mode iterator's position is in: ``sess``, else the default."""
    if sess is None:
        from nbdata.train.session import get_default_session
        sess = get_default_session()
    if sess is None:
        raise ValueError(f"Saver: {iterator.name} is a graph-mode iterator: pass the session "
                         "whose position to save or restore")
    return sess


def make_saveable_from_iterator(iterator, external_state_policy=None) -> SaveableIterator:
    """Wrap ``iterator`` so that ``nd.train.Saver([saveable])`` saves and restores it.

    >>> import nbdata as nd, os, tempfile
    >>> it = iter(nd.Dataset.range(4))
    >>> saver = nd.train.Saver([nd.make_saveable_from_iterator(it)])
    >>> _ = next(it)
    >>> path = saver.save(None, os.path.join(tempfile.mkdtemp(), "model"))
    >>> _ = next(it)
    >>> saver.restore(None, path)
    >>> [int(x) for x in it]
    [1, 2, 3]
    """
    return SaveableIterator(iterator)


class Saver:
    """Saves iterator state the way TF1's ``tf.train.Saver`` saves variables:
    ``save(sess, save_path, global_step=None)`` writes one file atomically and returns
    its path (``save_path-<global_step>`` when given); ``restore(sess, save_path)`` puts
    every iterator back. ``sess`` is accepted for TF1-shaped code and may be None."""

    def __init__(self, var_list=None, **kwargs):
        if var_list is None:   # TF1: what the graph's SAVEABLE_OBJECTS collection holds
            from nbdata.trace.graph import get_default_graph
            from nbdata.train.graph import GraphKeys
            var_list = get_default_graph().get_collection(GraphKeys.SAVEABLE_OBJECTS)
        items = list(var_list or [])
        for item in items:
            if not isinstance(item, SaveableIterator):
                raise TypeError("Saver: var_list holds what nd.make_saveable_from_iterator "
                                f"returns, got {type(item).__name__}")
        self.items = items

    def _names(self) -> list[str]:
        return [item.name or f"iterator_{k}" for k, item in enumerate(self.items)]

    def save(self, sess, save_path: str, global_step=None, **kwargs) -> str:
        path = os.fspath(save_path)
        if global_step is not None:
            path = f"{path}-{int(global_step)}"
        states = {name: item.save(sess) for name, item in zip(self._names(), self.items)}
        checkpoint.write_atomically(path, checkpoint.encode(states))
        return path

    def restore(self, sess, save_path: str) -> None:
        path = os.fspath(save_path)
        if not os.path.exists(path):
            raise NotFoundError(f"Saver.restore: no checkpoint at {path!r}")
        with open(path, "rb") as f:
            states = checkpoint.decode(f.read())
        for name, item in zip(self._names(), self.items):
            if name not in states:
                raise InvalidArgumentError(f"Saver.restore: {path} has no state for {name}")
            item.restore(sess, states[name])
