; Overflows a small buffer: each invocation prints 32 entries of 3 dwords. With
;   dprintf run samples/overflow.ll --buffer-size 256
; the buffer holds (256 - 16) / 4 = 60 dwords after its header: the first 20 lines are printed and the
; 36 dwords of the other 12 are reported as dropped.

@fmt_line = private unnamed_addr addrspace(4) constant [24 x i8] c"overflow line %u of 32\0A\00"

declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)

define void @main(ptr addrspace(7) %printf_buffer, i32 %invocation_id) {
entry:
  br label %loop
loop:
  %line = phi i32 [ 1, %entry ], [ %next, %loop ]
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %printf_buffer, ptr addrspace(4) @fmt_line, i32 %line)
  %next = add nuw nsw i32 %line, 1
  %more = icmp ule i32 %next, 32
  br i1 %more, label %loop, label %done
done:
  ret void
}
