; LLPC's forms (section 9 of docs/contract.md), as LLPC emits them today: printf without a buffer operand, with its format
; string in address space 0 or 4, beside the buffer-operand form; and LLPC's abort message, whose dwords
; are the message of the shader-abort proposal. Each invocation checks value = 100 - 40 * id:
;   dprintf run samples/llpc.ll --invocations 8
; prints the lines of invocations 0 to 3, then on stderr
;   error: device lost: shader abort: invocation 3: -20 is out of range (limit 0)
; and exits with status 3. On the cpu the printf buffer of the calls without one is the runtime's
; @lgc.debug.printf.buffer, the abort buffer @lgc.debug.abort.buffer. For amdpal,
;   dprintf compile samples/llpc.ll -o llpc.o --target amdpal
; loads the printf buffer from LLPC's user-data node below (a descriptor table in user data dword 0, the
; buffer's descriptor at its start), in @shade, which has LGC's user-data parameter %userdata0; the table
; says `.user_data_offset: 0`.

@checking = private unnamed_addr constant [30 x i8] c"invocation %u: checking %d...\00"
@fine = private unnamed_addr addrspace(4) constant [12 x i8] c" fine (%x)\0A\00"
@done = private unnamed_addr addrspace(4) constant [22 x i8] c"invocation %u: done.\0A\00"

declare void @lgc.debug.printf(...)
declare void @lgc.abort.msg(...)

define void @main(ptr addrspace(7) %printf_buffer, i32 %invocation_id) {
entry:
  call void @shade(i32 inreg 0, ptr addrspace(7) %printf_buffer, i32 %invocation_id)
  ret void
}

define void @shade(i32 inreg %userdata0, ptr addrspace(7) %printf_buffer, i32 %invocation_id) {
entry:
  %scaled = mul i32 %invocation_id, 40
  %value = sub i32 100, %scaled
  call void (...) @lgc.debug.printf(ptr @checking, i32 %invocation_id, i32 %value)
  %negative = icmp slt i32 %value, 0
  br i1 %negative, label %fail, label %fine
fail:
  ; "invocation %u: %d is out of range (limit %d)\n" in 12 dwords, then the ID, the value and the limit 0:
  ; the device writes the ID and the value, the table holds the other 13 dwords.
  call void (...) @lgc.abort.msg(i32 1870032489, i32 1769234787, i32 622882415, i32 622869109, i32 1936269412, i32 1953853216, i32 543584032, i32 1735287154, i32 1814569061, i32 1953066345, i32 694428960, i32 10, i32 %invocation_id, i32 %value, i32 0)
  unreachable
fine:
  call void (...) @lgc.debug.printf(ptr addrspace(4) @fine, i32 %value)
  call void (...) @lgc.debug.printf(ptr addrspace(7) %printf_buffer, ptr addrspace(4) @done, i32 %invocation_id)
  ret void
}

!lgc.user.data.nodes = !{!0, !1}
!0 = !{!"DescriptorTableVaPtr", i32 7, i32 0, i32 0, i32 1, i32 1}
!1 = !{!"DescriptorBuffer", i32 6, i32 0, i32 0, i32 4, i32 -16, i32 6, i32 4}
