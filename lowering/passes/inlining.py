"""The functions inlined into the entries, for the passes that need each access (and each gated
printf) in the entry that makes it: after noting which functions were called before, which inlining
hides (`PassContext.called`)."""

from __future__ import annotations

from ..services.buffer_accesses import inline_into_entries
from ..services.context import PassContext


def run(context: PassContext) -> None:
    """Inline every function that may be into the entries (`buffer_accesses.inline_into_entries`)."""
    counts = context.module.reference_counts()
    context.called = frozenset(name for name, count in counts.items() if count > 1)
    inline_into_entries(context)
