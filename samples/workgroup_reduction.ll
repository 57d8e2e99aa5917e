; A workgroup's sum through shared memory (section 14 of docs/contract.md): each invocation puts its ID in
; its slot of a tile, then the workgroup halves the tile, meeting at a barrier after each step, and
; invocation 0 prints the sum (@main). Its racy twin (@racy) leaves the barriers out: its invocations
; read slots the others have not written yet, or have already summed. The workgroup size is a power of
; two, at most 256, that divides the invocations (a partial workgroup would sum slots no one wrote):
;   dprintf run samples/workgroup_reduction.ll --invocations 1024 --workgroup-size 256
;   dprintf run samples/workgroup_reduction.ll --invocations 1024 --workgroup-size 256 --entry racy
; The debug information describes samples/workgroup_reduction.c:
;    1  __shared__ unsigned tile[256];
;    3  void main(buffer_t printf_buffer, unsigned id) {
;    4    unsigned local = lgc_workgroup_local_index(), size = lgc_workgroup_size();
;    5    tile[local] = id;
;    6    lgc_workgroup_barrier();
;    7    for (unsigned half = size / 2; half > 0; half /= 2) {
;    8      if (local < half)
;    9        tile[local] += tile[local + half];
;   10      lgc_workgroup_barrier();
;   11    }
;   12    if (local == 0)
;   13      printf("workgroup %u: sum %u\n", lgc_workgroup_index(), tile[0]);
;   14  }
; @racy is the same function without lines 6 and 10.

@tile = internal addrspace(3) global [256 x i32] undef, align 4
@text = private unnamed_addr addrspace(4) constant [22 x i8] c"workgroup %u: sum %u\0A\00"

declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)
declare void @lgc.workgroup.barrier()
declare i32 @lgc.workgroup.local.index()
declare i32 @lgc.workgroup.index()
declare i32 @lgc.workgroup.size()

define void @main(ptr addrspace(7) %printf_buffer, i32 %id) !dbg !10 {
entry:
  %local = call i32 @lgc.workgroup.local.index(), !dbg !11
  %size = call i32 @lgc.workgroup.size(), !dbg !11
  %mine = getelementptr [256 x i32], ptr addrspace(3) @tile, i32 0, i32 %local, !dbg !12
  store i32 %id, ptr addrspace(3) %mine, align 4, !dbg !12
  call void @lgc.workgroup.barrier(), !dbg !13
  %first = lshr i32 %size, 1, !dbg !14
  br label %step, !dbg !14

step:
  %half = phi i32 [ %first, %entry ], [ %next, %met ], !dbg !14
  %going = icmp ugt i32 %half, 0, !dbg !14
  br i1 %going, label %halve, label %done, !dbg !14

halve:
  %adds = icmp ult i32 %local, %half, !dbg !15
  br i1 %adds, label %add, label %added, !dbg !15

add:
  %other = add i32 %local, %half, !dbg !16
  %there = getelementptr [256 x i32], ptr addrspace(3) @tile, i32 0, i32 %other, !dbg !16
  %theirs = load i32, ptr addrspace(3) %there, align 4, !dbg !16
  %ours = load i32, ptr addrspace(3) %mine, align 4, !dbg !16
  %sum = add i32 %ours, %theirs, !dbg !16
  store i32 %sum, ptr addrspace(3) %mine, align 4, !dbg !16
  br label %added, !dbg !16

added:
  call void @lgc.workgroup.barrier(), !dbg !17
  br label %met, !dbg !17

met:
  %next = lshr i32 %half, 1, !dbg !14
  br label %step, !dbg !14

done:
  %leader = icmp eq i32 %local, 0, !dbg !18
  br i1 %leader, label %print, label %exit, !dbg !18

print:
  %group = call i32 @lgc.workgroup.index(), !dbg !19
  %total = load i32, ptr addrspace(3) @tile, align 4, !dbg !19
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %printf_buffer, ptr addrspace(4) @text, i32 %group, i32 %total), !dbg !19
  br label %exit, !dbg !19

exit:
  ret void, !dbg !20
}

define void @racy(ptr addrspace(7) %printf_buffer, i32 %id) !dbg !21 {
entry:
  %local = call i32 @lgc.workgroup.local.index(), !dbg !22
  %size = call i32 @lgc.workgroup.size(), !dbg !22
  %mine = getelementptr [256 x i32], ptr addrspace(3) @tile, i32 0, i32 %local, !dbg !23
  store i32 %id, ptr addrspace(3) %mine, align 4, !dbg !23
  %first = lshr i32 %size, 1, !dbg !24
  br label %step, !dbg !24

step:
  %half = phi i32 [ %first, %entry ], [ %next, %added ], !dbg !24
  %going = icmp ugt i32 %half, 0, !dbg !24
  br i1 %going, label %halve, label %done, !dbg !24

halve:
  %adds = icmp ult i32 %local, %half, !dbg !25
  br i1 %adds, label %add, label %added, !dbg !25

add:
  %other = add i32 %local, %half, !dbg !26
  %there = getelementptr [256 x i32], ptr addrspace(3) @tile, i32 0, i32 %other, !dbg !26
  %theirs = load i32, ptr addrspace(3) %there, align 4, !dbg !26
  %ours = load i32, ptr addrspace(3) %mine, align 4, !dbg !26
  %sum = add i32 %ours, %theirs, !dbg !26
  store i32 %sum, ptr addrspace(3) %mine, align 4, !dbg !26
  br label %added, !dbg !26

added:
  %next = lshr i32 %half, 1, !dbg !24
  br label %step, !dbg !24

done:
  %leader = icmp eq i32 %local, 0, !dbg !27
  br i1 %leader, label %print, label %exit, !dbg !27

print:
  %group = call i32 @lgc.workgroup.index(), !dbg !28
  %total = load i32, ptr addrspace(3) @tile, align 4, !dbg !28
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %printf_buffer, ptr addrspace(4) @text, i32 %group, i32 %total), !dbg !28
  br label %exit, !dbg !28

exit:
  ret void, !dbg !29
}

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2}

!0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !1, producer: "hand-written", emissionKind: FullDebug)
!1 = !DIFile(filename: "workgroup_reduction.c", directory: "samples")
!2 = !{i32 2, !"Debug Info Version", i32 3}
!3 = !DISubroutineType(types: !{})
!10 = distinct !DISubprogram(name: "main", scope: !1, file: !1, line: 3, type: !3, unit: !0)
!11 = !DILocation(line: 4, column: 20, scope: !10)
!12 = !DILocation(line: 5, column: 15, scope: !10)
!13 = !DILocation(line: 6, column: 3, scope: !10)
!14 = !DILocation(line: 7, column: 3, scope: !10)
!15 = !DILocation(line: 8, column: 15, scope: !10)
!16 = !DILocation(line: 9, column: 19, scope: !10)
!17 = !DILocation(line: 10, column: 5, scope: !10)
!18 = !DILocation(line: 12, column: 13, scope: !10)
!19 = !DILocation(line: 13, column: 5, scope: !10)
!20 = !DILocation(line: 14, column: 1, scope: !10)
!21 = distinct !DISubprogram(name: "racy", scope: !1, file: !1, line: 3, type: !3, unit: !0)
!22 = !DILocation(line: 4, column: 20, scope: !21)
!23 = !DILocation(line: 5, column: 15, scope: !21)
!24 = !DILocation(line: 7, column: 3, scope: !21)
!25 = !DILocation(line: 8, column: 15, scope: !21)
!26 = !DILocation(line: 9, column: 19, scope: !21)
!27 = !DILocation(line: 12, column: 13, scope: !21)
!28 = !DILocation(line: 13, column: 5, scope: !21)
!29 = !DILocation(line: 14, column: 1, scope: !21)
