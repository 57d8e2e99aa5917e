"""Races' driver side (SPEC 12): the table, the shadows' layout, the races they recorded."""
