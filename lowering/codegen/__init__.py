"""Code generation for lowered modules (ELF objects and PTX), isolated from LLVM's fatal errors."""
