"""Turning buffers back into text, messages and JSON: printf and abort buffers, rendering, its pool."""
