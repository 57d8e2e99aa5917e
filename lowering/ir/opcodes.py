"""LLVM's instruction opcodes by kind, as the passes that sort instructions read them."""

CASTS = frozenset(
    "trunc zext sext fptrunc fpext fptoui fptosi uitofp sitofp ptrtoint inttoptr bitcast addrspacecast".split(
        " "
    )
)
INTEGER_ARITHMETIC = frozenset("add sub mul udiv sdiv urem srem shl lshr ashr and or xor".split())
FLOAT_ARITHMETIC = frozenset("fadd fsub fmul fdiv frem fneg".split())
