; Several functions with full debug information: printf in called, non-inlined functions, one in a
; loop. The debug information describes this source, shading.c:
;    1  // shading.c
;    2  static float shade(unsigned id) {
;    3    return id * 0.5f + 1.0f;
;    4  }
;    5
;    6  static void report(buffer_t buffer, unsigned id, float value) {
;    7    printf("invocation %u: shade(%u) = %.2f\n", id, id, value);
;    8  }
;    9
;   10  static void walk(buffer_t buffer, unsigned id) {
;   11    for (int step = 0; step < 2; ++step)
;   12      printf("invocation %u takes the even path, step %d of %d\n", id, step, 2);
;   13  }
;   14
;   15  void main(buffer_t buffer, unsigned id) {
;   16    report(buffer, id, shade(id));
;   17    if (id % 2 == 0)
;   18      walk(buffer, id);
;   19  }
;   dprintf run samples/functions_dbg.ll --invocations 3

@fmt_report = private unnamed_addr addrspace(4) constant [33 x i8] c"invocation %u: shade(%u) = %.2f\0A\00"
@fmt_even = private unnamed_addr addrspace(4) constant [50 x i8] c"invocation %u takes the even path, step %d of %d\0A\00"

declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)

define internal float @shade(i32 %id) #0 !dbg !20 {
entry:
  %id.f = uitofp i32 %id to float, !dbg !21
  %half = fmul float %id.f, 5.000000e-01, !dbg !21
  %value = fadd float %half, 1.000000e+00, !dbg !21
  ret float %value, !dbg !21
}

define internal void @report(ptr addrspace(7) %buffer, i32 %id, float %value) #0 !dbg !30 {
entry:
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buffer, ptr addrspace(4) @fmt_report, i32 %id, i32 %id, float %value), !dbg !31
  ret void, !dbg !32
}

define internal void @walk(ptr addrspace(7) %buffer, i32 %id) #0 !dbg !40 {
entry:
  br label %loop, !dbg !41
loop:
  %step = phi i32 [ 0, %entry ], [ %next, %loop ]
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buffer, ptr addrspace(4) @fmt_even, i32 %id, i32 %step, i32 2), !dbg !42
  %next = add nsw i32 %step, 1, !dbg !41
  %more = icmp slt i32 %next, 2, !dbg !41
  br i1 %more, label %loop, label %done, !dbg !41
done:
  ret void, !dbg !43
}

define void @main(ptr addrspace(7) %printf_buffer, i32 %invocation_id) !dbg !50 {
entry:
  %value = call float @shade(i32 %invocation_id), !dbg !51
  call void @report(ptr addrspace(7) %printf_buffer, i32 %invocation_id, float %value), !dbg !51
  %parity = and i32 %invocation_id, 1, !dbg !52
  %even = icmp eq i32 %parity, 0, !dbg !52
  br i1 %even, label %then, label %done, !dbg !52
then:
  call void @walk(ptr addrspace(7) %printf_buffer, i32 %invocation_id), !dbg !53
  br label %done, !dbg !53
done:
  ret void, !dbg !54
}

attributes #0 = { noinline }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!1, !2}

!0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !3, producer: "hand-written for dprintf", isOptimized: false, runtimeVersion: 0, emissionKind: FullDebug)
!1 = !{i32 2, !"Debug Info Version", i32 3}
!2 = !{i32 7, !"Dwarf Version", i32 5}
!3 = !DIFile(filename: "shading.c", directory: "samples")
!4 = !DIBasicType(name: "unsigned int", size: 32, encoding: DW_ATE_unsigned)
!5 = !DIBasicType(name: "float", size: 32, encoding: DW_ATE_float)
!6 = !DICompositeType(tag: DW_TAG_structure_type, name: "buffer_t", file: !3, line: 1, flags: DIFlagFwdDecl)
!7 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !6, size: 64)

!20 = distinct !DISubprogram(name: "shade", scope: !3, file: !3, line: 2, type: !22, scopeLine: 2, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition, unit: !0)
!21 = !DILocation(line: 3, column: 3, scope: !20)
!22 = !DISubroutineType(types: !23)
!23 = !{!5, !4}

!30 = distinct !DISubprogram(name: "report", scope: !3, file: !3, line: 6, type: !33, scopeLine: 6, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition, unit: !0)
!31 = !DILocation(line: 7, column: 3, scope: !30)
!32 = !DILocation(line: 8, column: 1, scope: !30)
!33 = !DISubroutineType(types: !34)
!34 = !{null, !7, !4, !5}

!40 = distinct !DISubprogram(name: "walk", scope: !3, file: !3, line: 10, type: !44, scopeLine: 10, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition, unit: !0)
!41 = !DILocation(line: 11, column: 3, scope: !40)
!42 = !DILocation(line: 12, column: 5, scope: !40)
!43 = !DILocation(line: 13, column: 1, scope: !40)
!44 = !DISubroutineType(types: !45)
!45 = !{null, !7, !4}

!50 = distinct !DISubprogram(name: "main", scope: !3, file: !3, line: 15, type: !44, scopeLine: 15, spFlags: DISPFlagDefinition, unit: !0)
!51 = !DILocation(line: 16, column: 3, scope: !50)
!52 = !DILocation(line: 17, column: 7, scope: !50)
!53 = !DILocation(line: 18, column: 5, scope: !50)
!54 = !DILocation(line: 19, column: 1, scope: !50)
