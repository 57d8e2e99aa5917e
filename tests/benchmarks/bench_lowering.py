"""Benchmark of the pass: lowering time against the number of calls, and against LLVM's own -O2.

Generates modules of N printf calls (each with its own format string, the worst case for the table)
spread over 10 functions, with mixed layouts: 0 to 3 arguments drawn from integers of every width,
half, float, double and vectors (`--functions 1` puts every call into one block, which LLVM's inliner
splits at each call: the case where an inlining order that moves the rest of the block at each split
would grow quadratically). Measures `lower_sources` for the cpu target (wall and CPU time, best
of `--repeat`), then, in the same process, LLVM's -O2 module pipeline plus `emit_object` of the lowered
module on the host target machine. Prints both, their ratio, and how lowering time grows with N
(linear when the growth ratio is close to the ratio of the sizes). Ratios use CPU time, which other
work on a shared machine disturbs less than wall time.

Then the whole `dprintf compile` command, as a user runs it, for both targets, on modules whose calls
are all in one function (`--compile-calls`, best of `--compile-repeat` wall times each): the time per
target, amdpal's against cpu's, and how each grows. Run by hand:

    python3 tests/benchmarks/bench_lowering.py [--calls 1000 10000] [--repeat 3] [--functions 10]
        [--compile-calls 1000 5000 10000] [--compile-repeat 1]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import llvmlite.binding as llvm

from lowering.lowered_module import Source
from lowering.pipeline import lower_sources
from lowering.targets.machines import host_target_machine, optimize

FUNCTIONS = 10
# IR type -> (conversion, parameter name): every argument type of SPEC section 1, scalars and vectors.
ARGUMENTS = {
    "i1": ("%d", "%flag"),
    "i8": ("%hhu", "%byte"),
    "i16": ("%hd", "%short"),
    "i32": ("%d", "%int"),
    "i64": ("%lld", "%long"),
    "half": ("%g", "%half"),
    "float": ("%f", "%float"),
    "double": ("%e", "%double"),
    "<4 x float>": ("%v4f", "%vec4"),
    "<2 x i64>": ("%v2llx", "%vec2"),
    "<3 x i16>": ("%v3hu", "%vec3"),
}


def generate(calls: int, functions: int = FUNCTIONS) -> str:
    """A module of `calls` printf calls over `functions` functions, each call with its own format string."""
    types = list(ARGUMENTS)
    parameters = ", ".join(f"{ir_type} {name}" for ir_type, (_, name) in ARGUMENTS.items())
    strings, bodies = [], []
    for function in range(functions):
        body = [f"define void @shader{function}(ptr addrspace(7) %buf, {parameters}) {{", "entry:"]
        for number in range(function, calls, functions):
            chosen = [types[(number * 7 + k * 3) % len(types)] for k in range(number % 4)]
            text = f"call {number}:" + "".join(f" {ARGUMENTS[ir_type][0]}" for ir_type in chosen) + "\\0A"
            size = len(text) - 2 + 1
            strings.append(
                f'@s{number} = private unnamed_addr addrspace(4) constant [{size} x i8] c"{text}\\00"'
            )
            operands = "".join(f", {ir_type} {ARGUMENTS[ir_type][1]}" for ir_type in chosen)
            body.append(
                "  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf("
                f"ptr addrspace(7) %buf, ptr addrspace(4) @s{number}{operands})"
            )
        bodies.append("\n".join([*body, "  ret void", "}"]))
    declaration = "declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)"
    return "\n".join([*strings, declaration, *bodies]) + "\n"


def best(action: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The best wall and CPU seconds of `repeat` runs of `action`."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        action()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def codegen(ir: str) -> bytes:
    """LLVM's own work on the lowered module: parse, -O2 module pipeline, host object code."""
    machine = host_target_machine(jit=False)
    module = llvm.parse_assembly(ir)
    optimize(module, machine)
    return machine.emit_object(module)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--functions", type=int, default=FUNCTIONS)
    parser.add_argument("--compile-calls", type=int, nargs="*", default=[1000, 5000, 10000])
    parser.add_argument("--compile-repeat", type=int, default=1)
    args = parser.parse_args()

    lower_sources([Source("warm-up.ll", generate(10))])
    columns = ("calls", "lower wall s", "lower cpu s", "cpu us/call", "O2+codegen cpu s", "lower/O2 cpu")
    print(" ".join(f"{name:>{max(len(name), 7)}}" for name in columns))
    timings = []
    for calls in args.calls:
        sources = [Source(f"bench{calls}.ll", generate(calls, args.functions))]
        lowered = lower_sources(sources)
        wall, cpu = best(lambda sources=sources: lower_sources(sources), args.repeat)
        _, codegen_cpu = best(lambda ir=lowered.ir: codegen(ir), 1)
        timings.append((calls, cpu))
        print(
            f"{calls:>7} {wall:>12.3f} {cpu:>11.3f} {cpu / calls * 1e6:>11.1f} {codegen_cpu:>16.3f} "
            f"{cpu / codegen_cpu:>12.3f}"
        )
    for (small, small_cpu), (large, large_cpu) in zip(timings, timings[1:], strict=False):
        growth = large_cpu / small_cpu
        print(f"growth {small} -> {large} calls: cpu time x{growth:.1f} for size x{large / small:.0f}")
    if args.compile_calls:
        compile_command(args.compile_calls, args.compile_repeat)


def compile_command(sizes: list[int], repeat: int) -> None:
    """Wall time of the `dprintf compile` process for each target and size, all calls in one function."""
    print(f"\n{'calls':>7} {'compile cpu s':>14} {'compile amdpal s':>17} {'amdpal/cpu':>11}")
    timings = []
    with tempfile.TemporaryDirectory() as directory:
        for calls in sizes:
            module = Path(directory) / f"one_function_{calls}.ll"
            module.write_text(generate(calls, functions=1))
            seconds = {
                target: best(lambda t=target, m=module: _compile(m, t), repeat)[0]
                for target in ("cpu", "amdpal")
            }
            timings.append((calls, seconds))
            ratio = seconds["amdpal"] / seconds["cpu"]
            print(f"{calls:>7} {seconds['cpu']:>14.2f} {seconds['amdpal']:>17.2f} {ratio:>11.2f}")
    for (small, before), (large, after) in zip(timings, timings[1:], strict=False):
        growth = ", ".join(f"{target} x{after[target] / before[target]:.1f}" for target in ("cpu", "amdpal"))
        print(f"compile growth {small} -> {large} calls (size x{large / small:.0f}): {growth}")


def _compile(module: Path, target: str) -> None:
    output = module.with_suffix(f".{target}.o")
    command = [
        sys.executable,
        "-m",
        "lowering.cli",
        "compile",
        str(module),
        "--target",
        target,
        "-o",
        str(output),
    ]
    subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
