"""``prefetch``: produce up to ``buffer_size`` elements ahead on a background thread."""

from __future__ import annotations

import dataclasses
from typing import Any

from nbdata.ops.node import AUTOTUNE, UnaryNode, arg_field
from nbdata.ops.runtime import BackgroundChunks

AUTOTUNE_BUFFER = 2


@dataclasses.dataclass(frozen=True, eq=False)
class Prefetch(UnaryNode):
    buffer_size: Any = arg_field()
    op = "prefetch"

    def random_access(self) -> str | None:
        return self.input.random_access()

    def gather(self, ctx, rows):
        return self.input.gather(ctx, rows)

    def open_chunks(self, ctx, state=None):
        """The input run on a background thread, ``buffer_size`` elements ahead (at least
        one chunk); AUTOTUNE grows the buffer while the consumer waits, within
        ``Options().autotune.ram_budget`` (default 256 MiB)."""
        size = int(ctx.value(self.buffer_size))
        if size == 0:
            return ctx.open_chunks(self.input, state)
        autotune = size == AUTOTUNE and ctx.options.autotune.enabled
        capacity = AUTOTUNE_BUFFER if size == AUTOTUNE else size
        return BackgroundChunks(ctx, lambda s: ctx.open_chunks(self.input, s), self.spec, state,
                                capacity, ctx.stats(self), self.label, autotune,
                                ctx.options.autotune.ram_budget)
