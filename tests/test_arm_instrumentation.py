"""`--arm-values` (SPEC section 10): the bytes `vkGetShaderInstrumentationValuesARM` returns, read back
by a reader written here from the proposal's C structs, and the metric descriptions beside them."""

import json
import struct

import pytest
from profile_tables import BIG, BLOCKS, COUNTS, TABLE

from metadata.instrumentation.arm_values import arm_metrics, arm_values, arm_values_document
from metadata.instrumentation.profile import Profile
from metadata.instrumentation.table import METRICS, InstrumentationError, InstrumentationTable, Metric

# typedef struct VkShaderInstrumentationMetricDataHeaderARM {
#     uint32_t resultIndex; uint32_t resultSubIndex; VkShaderStageFlags stages; uint32_t basicBlockIndex;
# } VkShaderInstrumentationMetricDataHeaderARM;      /* VkShaderStageFlags: typedef VkFlags, uint32_t */
# "Each entry consists of a VkShaderInstrumentationMetricDataHeaderARM followed immediately by
#  numMetrics unsigned 64-bit counters", "a tightly packed array";
# stride = sizeof(VkShaderInstrumentationMetricDataHeaderARM) + sizeof(uint64_t) * numMetrics.
HEADER = "<4I"
VK_SHADER_STAGE_COMPUTE_BIT = 0x00000020  # vulkan_core.h


def read_values(data: bytes, num_metrics: int) -> list[tuple[tuple[int, int, int, int], tuple[int, ...]]]:
    """The proposal's reader loop: each block of data is {header, counters[numMetrics]}."""
    stride = struct.calcsize(HEADER) + struct.calcsize("<Q") * num_metrics
    assert stride == 16 + 8 * num_metrics
    assert len(data) % stride == 0
    records = []
    for offset in range(0, len(data), stride):
        header = struct.unpack_from(HEADER, data, offset)
        counters = struct.unpack_from(f"<{num_metrics}Q", data, offset + struct.calcsize(HEADER))
        records.append((header, counters))
    return records


def test_values_read_by_the_proposal_structs():
    profile = Profile(TABLE, COUNTS)
    data = arm_values(profile)
    records = read_values(data, len(METRICS))
    assert len(records) == len(BLOCKS)  # every block, entered or not: *pMetricBlockCount
    for (header, counters), block in zip(records, BLOCKS, strict=True):
        assert header == (0, 0, VK_SHADER_STAGE_COMPUTE_BIT, block.index)
        assert counters == tuple(COUNTS[block.index] * value for value in block.static)
    # sorted by resultIndex then basicBlockIndex
    assert [header[::3] for header, _ in records] == sorted(header[::3] for header, _ in records)
    # the proposal's example: sum a metric of one dispatch over its blocks
    fma = [metric.name for metric in METRICS].index("fma")
    assert sum(counters[fma] for header, counters in records if header[0] == 0) == 28


def test_result_index_and_the_document_beside_the_values():
    profile = Profile(TABLE, COUNTS)
    records = read_values(arm_values(profile, result_index=3), len(METRICS))
    assert {header[0] for header, _ in records} == {3}
    document = json.loads(json.dumps(arm_values_document(profile, result_index=3)))
    assert document == {
        "extension": "VK_ARM_shader_instrumentation",
        "numMetrics": 9,
        "perBasicBlockGranularity": True,
        "metricBlockCount": 11,
        "stride": 16 + 8 * 9,
        "byteOrder": "little",
        "header": ["resultIndex", "resultSubIndex", "stages", "basicBlockIndex"],
        "resultIndex": 3,
        "stages": 0x20,
        "metrics": [{"name": m.name, "description": m.description} for m in METRICS],
    }
    assert [m["name"] for m in arm_metrics(TABLE)] == [
        "blocks", "instructions", "int", "fp", "fma", "cvt", "sfu", "ls", "branch"
    ]  # fmt: skip


def test_largest_values_and_overflow():
    counts = [0] * len(BLOCKS)
    counts[7] = BIG  # block 7 has one instruction: BIG of each of blocks and instructions
    records = read_values(arm_values(Profile(TABLE, counts)), len(METRICS))
    assert records[7][1][:2] == (BIG, BIG)
    counts[0] = BIG  # block 0 has five instructions: more than a uint64_t holds
    with pytest.raises(
        InstrumentationError, match=r"block 0 \(@main\) executed 92233720368547758075 instructions"
    ):
        arm_values(Profile(TABLE, counts))


def test_bad_arguments():
    with pytest.raises(InstrumentationError, match="resultIndex 4294967296 is not a 32-bit index"):
        arm_values(Profile(TABLE, COUNTS), result_index=2**32)
    long = InstrumentationTable((), (*METRICS[:8], Metric("branch", "x" * 256)))
    with pytest.raises(InstrumentationError, match=r"does not fit a char\[VK_MAX_DESCRIPTION_SIZE\]"):
        arm_metrics(long)
    assert arm_values(Profile(InstrumentationTable(), [])) == b""
