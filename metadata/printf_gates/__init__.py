"""The printf gates' driver side (issue 23): the per-site line limit's table and report, and the
lists of invocations that print."""
