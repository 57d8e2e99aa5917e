"""The passes, one module each, and the per-run state they share; `lowering.pipeline` composes them."""
