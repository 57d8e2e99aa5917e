"""Workgroups' driver side (SPEC 14): the table of the barriers a module meets at, and what the
device recorded of barrier divergence (a barrier some invocations of a workgroup reached while
others exited or waited at another)."""
