; Out-of-bounds accesses caught by validation (section 11 of docs/contract.md). Run with a 4096-byte data buffer:
;   dprintf run samples/out_of_bounds.ll --validate --buffer 4096 --invocations 32
; The debug information describes this source, bounds.c:
;    1  // bounds.c: `out` holds at least 1024 ints (the IR says `dereferenceable(4096)`)
;    2  void main(buffer_t printf, unsigned id, int *out) {
;    3    out[1023] = id;               // the last int: provably in bounds, so not checked
;    4    out[1000 + id] = id;          // past the end for id >= 24
;    5    int x = out[1024 + id];       // past the end for every invocation: reads 0
;    6    printf("invocation %u read %d\n", id, x);
;    7  }

@fmt = private unnamed_addr addrspace(4) constant [23 x i8] c"invocation %u read %d\0A\00"

declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)

define void @main(ptr addrspace(7) %printf, i32 %id, ptr addrspace(7) dereferenceable(4096) %out) !dbg !10 {
entry:
  %last = getelementptr i32, ptr addrspace(7) %out, i64 1023, !dbg !11
  store i32 %id, ptr addrspace(7) %last, align 4, !dbg !11
  %wide = zext i32 %id to i64, !dbg !12
  %index = add i64 %wide, 1000, !dbg !12
  %slot = getelementptr inbounds i32, ptr addrspace(7) %out, i64 %index, !dbg !12
  store i32 %id, ptr addrspace(7) %slot, align 4, !dbg !12
  %far = add i64 %wide, 1024, !dbg !13
  %from = getelementptr inbounds i32, ptr addrspace(7) %out, i64 %far, !dbg !13
  %x = load i32, ptr addrspace(7) %from, align 4, !dbg !13
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %printf, ptr addrspace(4) @fmt, i32 %id, i32 %x), !dbg !14
  ret void, !dbg !15
}

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2}

!0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1, producer: "hand-written", emissionKind: FullDebug)
!1 = !DIFile(filename: "bounds.c", directory: "/src")
!2 = !{i32 2, !"Debug Info Version", i32 3}
!10 = distinct !DISubprogram(name: "main", scope: !1, file: !1, line: 2, type: !16, unit: !0)
!11 = !DILocation(line: 3, column: 13, scope: !10)
!12 = !DILocation(line: 4, column: 18, scope: !10)
!13 = !DILocation(line: 5, column: 11, scope: !10)
!14 = !DILocation(line: 6, column: 3, scope: !10)
!15 = !DILocation(line: 7, column: 1, scope: !10)
!16 = !DISubroutineType(types: !17)
!17 = !{}
