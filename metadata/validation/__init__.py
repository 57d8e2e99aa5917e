"""Validation's driver side (SPEC 11, 13): its table, the live ranges, the report of failed checks."""
