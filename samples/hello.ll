; The first program: every invocation prints a greeting with its ID.
;   dprintf run samples/hello.ll --invocations 4

@greeting = private unnamed_addr addrspace(4) constant [27 x i8] c"Hello from invocation %u!\0A\00"

declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)

define void @main(ptr addrspace(7) %printf_buffer, i32 %invocation_id) {
entry:
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %printf_buffer, ptr addrspace(4) @greeting, i32 %invocation_id)
  ret void
}
