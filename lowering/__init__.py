"""The compiler side: the llvmlite pass that lowers `@lgc.debug.printf` and `@lgc.debug.abort` into
buffer stores, code generation to ELF and PTX, the harness that runs lowered code, and `dprintf`."""
