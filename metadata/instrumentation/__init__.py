"""Instrumentation's driver side (SPEC 10): the table, the profile, its page, the Arm proposal's values."""
