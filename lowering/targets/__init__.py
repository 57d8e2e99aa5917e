"""The targets as data, LLVM's target machines for them, and the module globals a runtime sets."""
