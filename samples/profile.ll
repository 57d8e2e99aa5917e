; A shader to profile (section 10 of docs/contract.md), with the debug information of its source, profile.c beside it:
; a loop whose trip count depends on the invocation (id % 8), a branch some invocations take
; (id % 3 == 0) into a call that is not inlined, and a printf in one invocation of sixteen (id % 16 == 3); integer,
; floating-point, fma, conversion, square-root, memory and branch instructions.
;   dprintf profile samples/profile.ll --invocations 64
;   dprintf profile samples/profile.ll --invocations 64 --annotate
;   dprintf profile samples/profile.ll --invocations 64 --html profile.html

@fmt = private unnamed_addr addrspace(4) constant [25 x i8] c"invocation %u: sum %.2f\0A\00"

declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)
declare float @llvm.sqrt.f32(float)
declare float @llvm.fma.f32(float, float, float)

define internal float @falloff(float %distance) #0 !dbg !20 {
entry:
  %root = call float @llvm.sqrt.f32(float %distance), !dbg !21
  %scaled = fmul float %root, 2.500000e-01, !dbg !21
  ret float %scaled, !dbg !21
}

define void @main(ptr addrspace(7) %printf_buffer, i32 %invocation_id) !dbg !30 {
entry:
  %steps = urem i32 %invocation_id, 8, !dbg !31
  %any = icmp ne i32 %steps, 0, !dbg !32
  br i1 %any, label %loop, label %after, !dbg !32
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %loop ]
  %sum = phi float [ 0.000000e+00, %entry ], [ %sum.next, %loop ]
  %i.f = uitofp i32 %i to float, !dbg !33
  %sum.next = call float @llvm.fma.f32(float %i.f, float 5.000000e-01, float %sum), !dbg !33
  %next = add i32 %i, 1, !dbg !32
  %more = icmp ult i32 %next, %steps, !dbg !32
  br i1 %more, label %loop, label %after, !dbg !32
after:
  %total = phi float [ 0.000000e+00, %entry ], [ %sum.next, %loop ]
  %third = urem i32 %invocation_id, 3, !dbg !34
  %near = icmp eq i32 %third, 0, !dbg !34
  br i1 %near, label %shade, label %report, !dbg !34
shade:
  %fall = call float @falloff(float %total), !dbg !35
  %shaded = fadd float %total, %fall, !dbg !35
  br label %report, !dbg !35
report:
  %value = phi float [ %total, %after ], [ %shaded, %shade ]
  %sixteenth = and i32 %invocation_id, 15, !dbg !36
  %prints = icmp eq i32 %sixteenth, 3, !dbg !36
  br i1 %prints, label %print, label %done, !dbg !36
print:
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %printf_buffer, ptr addrspace(4) @fmt, i32 %invocation_id, float %value), !dbg !37
  br label %done, !dbg !37
done:
  ret void, !dbg !38
}

attributes #0 = { noinline }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!1, !2}

!0 = distinct !DICompileUnit(language: DW_LANG_C99, file: !3, producer: "hand-written for dprintf", isOptimized: false, runtimeVersion: 0, emissionKind: FullDebug)
!1 = !{i32 2, !"Debug Info Version", i32 3}
!2 = !{i32 7, !"Dwarf Version", i32 5}
!3 = !DIFile(filename: "profile.c", directory: "samples")
!4 = !DIBasicType(name: "unsigned int", size: 32, encoding: DW_ATE_unsigned)
!5 = !DIBasicType(name: "float", size: 32, encoding: DW_ATE_float)
!6 = !DICompositeType(tag: DW_TAG_structure_type, name: "buffer_t", file: !3, line: 7, flags: DIFlagFwdDecl)
!7 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !6, size: 64)

!20 = distinct !DISubprogram(name: "falloff", scope: !3, file: !3, line: 3, type: !22, scopeLine: 3, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition, unit: !0)
!21 = !DILocation(line: 4, column: 3, scope: !20)
!22 = !DISubroutineType(types: !23)
!23 = !{!5, !5}

!30 = distinct !DISubprogram(name: "main", scope: !3, file: !3, line: 7, type: !39, scopeLine: 7, spFlags: DISPFlagDefinition, unit: !0)
!31 = !DILocation(line: 8, column: 20, scope: !30)
!32 = !DILocation(line: 10, column: 26, scope: !30)
!33 = !DILocation(line: 11, column: 11, scope: !30)
!34 = !DILocation(line: 12, column: 10, scope: !30)
!35 = !DILocation(line: 13, column: 12, scope: !30)
!36 = !DILocation(line: 14, column: 10, scope: !30)
!37 = !DILocation(line: 15, column: 5, scope: !30)
!38 = !DILocation(line: 16, column: 1, scope: !30)
!39 = !DISubroutineType(types: !40)
!40 = !{null, !7, !4}
