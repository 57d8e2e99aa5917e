"""What the passes share: the per-run state (`context`), finding calls, the printf and abort helpers
and how they reserve and store, format strings and their arguments, runtime buffers, and which
buffer each access goes to. Services edit or read the module for a pass; they are not passes."""
