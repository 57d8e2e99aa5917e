; Shader abort: each invocation checks value = 100 - 40 * id and aborts when it is negative, which
; invocation 3 is the first to do. The abort loses the device:
;   dprintf run samples/abort.ll --invocations 8
; prints the lines of invocations 0 to 3 written before the abort, then on stderr
;   error: device lost: shader abort: invocation 3: value -20 is negative (limit 0.0)
; and exits with status 3. Invocation 3 prints nothing after its abort, and invocations 4 to 7 never run.

@fmt_before = private unnamed_addr addrspace(4) constant [38 x i8] c"invocation %u: checking its value %d\0A\00"
@fmt_after = private unnamed_addr addrspace(4) constant [33 x i8] c"invocation %u: value %d is fine\0A\00"
@fmt_abort = private unnamed_addr addrspace(4) constant [49 x i8] c"invocation %u: value %d is negative (limit %.1f)\00"

declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)
declare void @lgc.debug.abort(ptr addrspace(7), ptr addrspace(4), ...)

define void @main(ptr addrspace(7) %printf_buffer, ptr addrspace(7) %abort_buffer, i32 %invocation_id) {
entry:
  %scaled = mul i32 %invocation_id, 40
  %value = sub i32 100, %scaled
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %printf_buffer, ptr addrspace(4) @fmt_before, i32 %invocation_id, i32 %value)
  %negative = icmp slt i32 %value, 0
  br i1 %negative, label %fail, label %fine
fail:
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.abort(ptr addrspace(7) %abort_buffer, ptr addrspace(4) @fmt_abort, i32 %invocation_id, i32 %value, float 0.0)
  unreachable
fine:
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %printf_buffer, ptr addrspace(4) @fmt_after, i32 %invocation_id, i32 %value)
  ret void
}
