"""The proposal's output (`VK_ARM_shader_instrumentation`, SPEC section 10): the bytes
`vkGetShaderInstrumentationValuesARM` returns for a profiled dispatch, and the metric descriptions
`vkEnumeratePhysicalDeviceShaderInstrumentationMetricsARM` returns, so that a tool written for the
proposal reads a profile unchanged.

The values are a tightly packed array of records, one a block, sorted by resultIndex then
basicBlockIndex (one dispatch: block order). A record is a `VkShaderInstrumentationMetricDataHeaderARM`,

    struct { uint32_t resultIndex; uint32_t resultSubIndex; VkShaderStageFlags stages;
             uint32_t basicBlockIndex; }

(16 bytes; `VkShaderStageFlags` is a 32-bit `VkFlags`), then `numMetrics` `uint64_t` values in the
order the metrics are enumerated: stride 16 + 8 * numMetrics, so the values are 8-byte aligned and
there is no padding. Little-endian, as on the hosts the proposal's drivers run on.
"""

from __future__ import annotations

import struct
from typing import Any

from .profile import U64_MAX, Profile
from .table import InstrumentationError, InstrumentationTable

RECORD_HEADER = struct.Struct("<IIII")  # resultIndex, resultSubIndex, stages, basicBlockIndex
VALUE = struct.Struct("<Q")
VK_SHADER_STAGE_COMPUTE_BIT = 0x20
VK_MAX_DESCRIPTION_SIZE = 256  # the char arrays of VkShaderInstrumentationMetricDescriptionARM, NUL included
RESULT_SUB_INDEX = 0  # a shader group index for ray tracing only


def record_stride(metrics: int) -> int:
    """Bytes of one record: the header and `metrics` values."""
    return RECORD_HEADER.size + VALUE.size * metrics


def arm_values(profile: Profile, result_index: int = 0) -> bytes:
    """The array `vkGetShaderInstrumentationValuesARM` returns for `profile`'s dispatch (the
    instrumentation object's command number `result_index`; a harness run is one dispatch, 0): a record
    for every block, entered or not, with each metric's executed count. InstrumentationError when a
    value does not fit the proposal's `uint64_t` (a count near 2^64 times a static count above 1)."""
    if not 0 <= result_index <= 0xFFFFFFFF:
        raise InstrumentationError(f"resultIndex {result_index} is not a 32-bit index")
    names = [metric.name for metric in profile.table.metrics]
    values = struct.Struct(f"<{len(names)}Q")
    records = []
    for row in profile.blocks:
        for name, value in zip(names, row.executed, strict=True):
            if value > U64_MAX:
                raise InstrumentationError(
                    f"block {row.block.index} (@{row.block.function}) executed {value} {name}, "
                    f"more than a uint64_t value of vkGetShaderInstrumentationValuesARM holds"
                )
        header = RECORD_HEADER.pack(
            result_index, RESULT_SUB_INDEX, VK_SHADER_STAGE_COMPUTE_BIT, row.block.index
        )
        records.append(header + values.pack(*row.executed))
    return b"".join(records)


def arm_metrics(table: InstrumentationTable) -> list[dict[str, str]]:
    """The metric descriptions as `vkEnumeratePhysicalDeviceShaderInstrumentationMetricsARM` returns
    them, in order: `{"name", "description"}` each. InstrumentationError when one does not fit its
    `char[VK_MAX_DESCRIPTION_SIZE]`."""
    for metric in table.metrics:
        for field in (metric.name, metric.description):
            if len(field.encode()) >= VK_MAX_DESCRIPTION_SIZE:
                raise InstrumentationError(
                    f"metric {metric.name!r}: {field[:40]!r}... does not fit a "
                    f"char[VK_MAX_DESCRIPTION_SIZE] ({VK_MAX_DESCRIPTION_SIZE} bytes with its NUL)"
                )
    return [{"name": metric.name, "description": metric.description} for metric in table.metrics]


def arm_values_document(profile: Profile, result_index: int = 0) -> dict[str, Any]:
    """What the command writes beside the values (FILE.json beside FILE): what a tool learns from the
    proposal's other queries, so it can read the bytes with no Vulkan device at hand.

        {"extension": "VK_ARM_shader_instrumentation",
         "numMetrics": 9,                      # VkPhysicalDeviceShaderInstrumentationPropertiesARM
         "perBasicBlockGranularity": true,
         "metricBlockCount": 17,               # *pMetricBlockCount: the records in the file
         "stride": 88,                         # bytes of a record: 16 + 8 * numMetrics
         "byteOrder": "little",
         "header": ["resultIndex", "resultSubIndex", "stages", "basicBlockIndex"],
         "resultIndex": 0,                     # this dispatch's
         "stages": 32,                         # VK_SHADER_STAGE_COMPUTE_BIT
         "metrics": [{"name": "blocks", "description": "..."}, ...]}   # the enumeration, in order
    """
    metrics = arm_metrics(profile.table)
    return {
        "extension": "VK_ARM_shader_instrumentation",
        "numMetrics": len(metrics),
        "perBasicBlockGranularity": True,
        "metricBlockCount": len(profile.blocks),
        "stride": record_stride(len(metrics)),
        "byteOrder": "little",
        "header": ["resultIndex", "resultSubIndex", "stages", "basicBlockIndex"],
        "resultIndex": result_index,
        "stages": VK_SHADER_STAGE_COMPUTE_BIT,
        "metrics": metrics,
    }
