; Races between invocations, found by --races (section 12 of docs/contract.md): a reduction into 64 partial sums whose
; invocations add with a plain load and store (@main), and its fixed twin (@fixed), which adds with one
; atomic. Run with a 256-byte data buffer:
;   dprintf run samples/races.ll --races --buffer 256 --invocations 256
;   dprintf run samples/races.ll --races --buffer 256 --invocations 256 --entry fixed
; The debug information describes samples/races.c:
;    4  void main(buffer_t printf_buffer, unsigned id, unsigned *partial) {
;    5    partial[id % 64] += id;                   // 4 invocations a sum, a plain load and store: they race
;    6  }
;    8  void fixed(buffer_t printf_buffer, unsigned id, unsigned *partial) {
;    9    atomic_fetch_add(&partial[id % 64], id);  // one atomic add each: no race
;   10  }

define void @main(ptr addrspace(7) %printf_buffer, i32 %id, ptr addrspace(7) %partial) !dbg !10 {
entry:
  %bin = urem i32 %id, 64, !dbg !11
  %index = zext i32 %bin to i64, !dbg !11
  %slot = getelementptr inbounds i32, ptr addrspace(7) %partial, i64 %index, !dbg !11
  %sum = load i32, ptr addrspace(7) %slot, align 4, !dbg !11
  %next = add i32 %sum, %id, !dbg !11
  store i32 %next, ptr addrspace(7) %slot, align 4, !dbg !11
  ret void, !dbg !12
}

define void @fixed(ptr addrspace(7) %printf_buffer, i32 %id, ptr addrspace(7) %partial) !dbg !13 {
entry:
  %bin = urem i32 %id, 64, !dbg !14
  %index = zext i32 %bin to i64, !dbg !14
  %slot = getelementptr inbounds i32, ptr addrspace(7) %partial, i64 %index, !dbg !14
  %old = atomicrmw add ptr addrspace(7) %slot, i32 %id monotonic, align 4, !dbg !14
  ret void, !dbg !15
}

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2}

!0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1, producer: "hand-written", emissionKind: FullDebug)
!1 = !DIFile(filename: "races.c", directory: "samples")
!2 = !{i32 2, !"Debug Info Version", i32 3}
!10 = distinct !DISubprogram(name: "main", scope: !1, file: !1, line: 4, type: !16, unit: !0)
!11 = !DILocation(line: 5, column: 20, scope: !10)
!12 = !DILocation(line: 6, column: 1, scope: !10)
!13 = distinct !DISubprogram(name: "fixed", scope: !1, file: !1, line: 8, type: !16, unit: !0)
!14 = !DILocation(line: 9, column: 3, scope: !13)
!15 = !DILocation(line: 10, column: 1, scope: !13)
!16 = !DISubroutineType(types: !17)
!17 = !{}
