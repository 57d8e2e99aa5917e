"""The optional features, registered once (issue 30): the core walks `FEATURES` and knows each one only
through the contract of `feature.Feature`. A feature is one folder here (its passes, runtime buffers and
reports) and one under `metadata/` (its table and decoding); adding one is a folder and a line below.

The order is the metadata document's order of the features' tables, and the order their passes run in
after inlining (validation before races, so that an access that fails its check is not recorded;
workgroups last, so that the cpu's workgroup functions hold what the others added).
"""

from __future__ import annotations

from .feature import Feature
from .instrumentation import Instrumentation
from .printf_gates import PrintfGates
from .races import Races
from .validation import Validation
from .workgroups import Workgroups

FEATURES: tuple[Feature, ...] = (Validation(), Instrumentation(), Races(), PrintfGates(), Workgroups())


def feature_named(name: str) -> Feature:
    """The registered feature called `name`; KeyError when there is none."""
    for feature in FEATURES:
        if feature.name == name:
            return feature
    raise KeyError(name)
