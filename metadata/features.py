"""The features' tables in a metadata note, registered once for the driver side (issue 30): each one's
key, the package of its table, decoding and report, the class that reads the table, the names that
package gives `metadata`'s API, and how linking treats it (`linking.link_check_tables`). The rest of
`metadata` names no feature.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Merge = Callable[[Sequence[tuple[str, Any]]], tuple[Any, list[str]]]


@dataclass(frozen=True)
class FeatureTable:
    """A feature's table: its document key, its package under `metadata`, the class that reads it
    (`module:Class`, whose `from_document` gives the table, its rows not used in `warnings` when it has
    them), and either the function that merges several ELFs' tables (`module:function`, given (source,
    value) pairs; the linked value and the warnings) or why one ELF holds one (`one_shader`).
    `exports`: names of `metadata`'s API, each with the module of the package that defines it.
    `hexadecimal`: the keys whose integers `dprintf inspect` shows in hexadecimal, with their format."""

    key: str
    package: str
    reader: str
    merge: str | None = None
    one_shader: str = ""
    exports: Mapping[str, str] = field(default_factory=dict)
    hexadecimal: Mapping[str, str] = field(default_factory=dict)

    def merged(self, having: Sequence[tuple[str, Any]]) -> tuple[Any, list[str]]:
        merge: Merge = self._named(self.merge or "")
        return merge(having)

    def unused(self, document: dict[Any, Any]) -> list[str]:
        """What a decoder leaves out of the table in `document` (a message a row); DprintfError when it
        cannot use the table at all."""
        table = self._named(self.reader).from_document(document)
        return list(getattr(table, "warnings", ()))

    def _named(self, where: str) -> Any:
        """The attribute `name` of the package's `module`, for `where` = `module:name`."""
        module, _, name = where.partition(":")
        return getattr(importlib.import_module(f"metadata.{self.package}.{module}"), name)


FEATURE_TABLES = (
    FeatureTable(
        "amdpal.validation",
        "validation",
        "table:ValidationTable",
        merge="linking:link_validation",
        hexadecimal={".index": "#014x"},  # a site's ID, as a format string's
    ),
    FeatureTable(
        "amdpal.instrumentation",
        "instrumentation",
        "table:InstrumentationTable",
        one_shader="its counters' positions in the buffer are compiled into the shader's code",
        exports={
            **dict.fromkeys(("arm_metrics", "arm_values", "arm_values_document"), "arm_values"),
            **dict.fromkeys(
                ("BlockInfo", "InstrumentationError", "InstrumentationTable", "LineCost", "Metric"), "table"
            ),
            **dict.fromkeys(("read_counters", "read_counter_values"), "table"),
            **dict.fromkeys(
                ("BlockRow", "LineRow", "Listing", "ListingLine", "Profile", "format_count", "format_share"),
                "profile",
            ),
            "html_page": "profile_html",
        },
    ),
    FeatureTable(
        "amdpal.races",
        "races",
        "table:RaceTable",
        one_shader="its site numbers are compiled into the shader's code and packed into the shadow",
    ),
    FeatureTable(
        "amdpal.printf_line_limit",
        "printf_gates",
        "line_limit:LineLimit",
        one_shader="its sites' counters' positions in the buffer are compiled into the shader's code",
        exports={"DroppedLines": "line_limit", "LineLimit": "line_limit"},
    ),
    FeatureTable(
        "amdpal.workgroups",
        "workgroups",
        "table:WorkgroupTable",
        one_shader="its barriers' numbers are compiled into the shader's code",
        exports={"WorkgroupTable": "table"},
    ),
)
