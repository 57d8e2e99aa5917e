; Undefined behaviour caught by validation (contract section 13, docs/contract.md). Run with
;   dprintf run samples/undefined_behaviour.ll --validate=ub --invocations 8
; A failed test skips its instruction, whose result is then 0, reports its site once and lets the
; invocation go on; the run exits with status 4. Without --validate=ub the division by zero traps on the
; cpu: the worker dies with SIGFPE and the run exits with status 1.
; The debug information describes this source, ub.c:
;    1  // ub.c: a division, a shift and a conversion that some invocations get wrong
;    2  void main(buffer_t printf, unsigned id) {
;    3    int quotient = 100 / (int)(id % 4);   // division by zero for ids 0 and 4
;    4    int bit = 1 << (id + 28);             // a shift by 32 or more for ids 4 to 7
;    5    int big = (int)(id * 1.0e9f);         // out of int's range for ids 3 to 7
;    6    printf("invocation %u: %d %d %d\n", id, quotient, bit, big);
;    7  }

@fmt = private unnamed_addr addrspace(4) constant [25 x i8] c"invocation %u: %d %d %d\0A\00"

declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)

define void @main(ptr addrspace(7) %printf, i32 %id) !dbg !10 {
entry:
  %remainder = urem i32 %id, 4, !dbg !11
  %quotient = sdiv i32 100, %remainder, !dbg !11
  %amount = add i32 %id, 28, !dbg !12
  %bit = shl i32 1, %amount, !dbg !12
  %real = uitofp i32 %id to float, !dbg !13
  %scaled = fmul float %real, 1.0e9, !dbg !13
  %big = fptosi float %scaled to i32, !dbg !13
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %printf, ptr addrspace(4) @fmt, i32 %id, i32 %quotient, i32 %bit, i32 %big), !dbg !14
  ret void, !dbg !15
}

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2}

!0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1, producer: "hand-written", emissionKind: FullDebug)
!1 = !DIFile(filename: "ub.c", directory: "/src")
!2 = !{i32 2, !"Debug Info Version", i32 3}
!10 = distinct !DISubprogram(name: "main", scope: !1, file: !1, line: 2, type: !16, unit: !0)
!11 = !DILocation(line: 3, column: 22, scope: !10)
!12 = !DILocation(line: 4, column: 15, scope: !10)
!13 = !DILocation(line: 5, column: 13, scope: !10)
!14 = !DILocation(line: 6, column: 3, scope: !10)
!15 = !DILocation(line: 7, column: 1, scope: !10)
!16 = !DISubroutineType(types: !17)
!17 = !{}
