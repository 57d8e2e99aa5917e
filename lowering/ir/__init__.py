"""The IR layer every pass edits: LLVM's tokens, a module's functions, blocks, instructions, globals
and metadata, the edits a pass makes, and reading and verifying modules with llvmlite.

Passes read and edit IR only through this package; no regular expression on IR text lives outside it.
New code (helpers) is built with `llvmlite.ir`'s builder and added with `Module.add_ir`.
"""
