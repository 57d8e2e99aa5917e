; Reads of bytes never written, caught by validation (contract section 13, docs/contract.md). A data
; buffer given without a file starts never written; run with a 64-byte one:
;   dprintf run samples/uninitialised_reads.ll --validate=init --buffer 64 --invocations 8
; Each invocation writes one int and reads it back (fine), then reads its neighbour's, which no
; invocation writes (reported once, with the first byte never written). The run exits with status 4.
; With a file giving the buffer's bytes (--buffer 64:FILE) every read is of bytes written.
; The debug information describes this source, init.c:
;    1  // init.c: `data` holds 16 ints; the invocations write the even ones only
;    2  void main(buffer_t printf, unsigned id, int *data) {
;    3    data[2 * id] = id;              // the even ints
;    4    int mine = data[2 * id];        // written just before: fine
;    5    int next = data[2 * id + 1];    // an odd int, never written
;    6    printf("invocation %u: %d %d\n", id, mine, next);
;    7  }

@fmt = private unnamed_addr addrspace(4) constant [22 x i8] c"invocation %u: %d %d\0A\00"

declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)

define void @main(ptr addrspace(7) %printf, i32 %id, ptr addrspace(7) %data) !dbg !10 {
entry:
  %wide = zext i32 %id to i64, !dbg !11
  %even = shl i64 %wide, 1, !dbg !11
  %slot = getelementptr inbounds i32, ptr addrspace(7) %data, i64 %even, !dbg !11
  store i32 %id, ptr addrspace(7) %slot, align 4, !dbg !11
  %mine = load i32, ptr addrspace(7) %slot, align 4, !dbg !12
  %odd = add i64 %even, 1, !dbg !13
  %neighbour = getelementptr inbounds i32, ptr addrspace(7) %data, i64 %odd, !dbg !13
  %next = load i32, ptr addrspace(7) %neighbour, align 4, !dbg !13
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %printf, ptr addrspace(4) @fmt, i32 %id, i32 %mine, i32 %next), !dbg !14
  ret void, !dbg !15
}

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2}

!0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1, producer: "hand-written", emissionKind: FullDebug)
!1 = !DIFile(filename: "init.c", directory: "/src")
!2 = !{i32 2, !"Debug Info Version", i32 3}
!10 = distinct !DISubprogram(name: "main", scope: !1, file: !1, line: 2, type: !16, unit: !0)
!11 = !DILocation(line: 3, column: 16, scope: !10)
!12 = !DILocation(line: 4, column: 14, scope: !10)
!13 = !DILocation(line: 5, column: 14, scope: !10)
!14 = !DILocation(line: 6, column: 3, scope: !10)
!15 = !DILocation(line: 7, column: 1, scope: !10)
!16 = !DISubroutineType(types: !17)
!17 = !{}
