"""The tests' process is set up as the `dprintf` command sets up its own (`lowering.cli.main`): numpy's
OpenBLAS starts no pool of threads, so that code generation forks (`lowering.codegen.isolation`) unless a test
starts threads of its own."""

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
