; Every argument type of section 1 of docs/contract.md (i1, i8, i16, i32, i64, half, float, double) and every vector
; width (2, 3, 4, 8, 16), each with a few conversions. The values change with the invocation ID.
;   dprintf run samples/all_types.ll --invocations 2

@fmt_i1 = private unnamed_addr addrspace(4) constant [11 x i8] c"i1: %d %u\0A\00"
@fmt_i8 = private unnamed_addr addrspace(4) constant [27 x i8] c"i8: %d %u %x %hhd %hhu %c\0A\00"
@fmt_i16 = private unnamed_addr addrspace(4) constant [21 x i8] c"i16: %d %hd %hu %#x\0A\00"
@fmt_i32 = private unnamed_addr addrspace(4) constant [51 x i8] c"i32: %d %i %u %o %x %X %#o %+d % d %05d [%-6d] %c\0A\00"
@fmt_i64 = private unnamed_addr addrspace(4) constant [31 x i8] c"i64: %lld %llu %llx %ld %#llX\0A\00"
@fmt_half = private unnamed_addr addrspace(4) constant [19 x i8] c"half: %f %e %g %a\0A\00"
@fmt_float = private unnamed_addr addrspace(4) constant [31 x i8] c"float: %f %.3e %G %A [%10.4f]\0A\00"
@fmt_double = private unnamed_addr addrspace(4) constant [34 x i8] c"double: %f %e %g %a %lf %.10g %E\0A\00"
@fmt_v2 = private unnamed_addr addrspace(4) constant [33 x i8] c"v2 x i1: %v2u; v2 x i64: %v2lld\0A\00"
@fmt_v3 = private unnamed_addr addrspace(4) constant [35 x i8] c"v3 x float: %v3f; v3 x i16: %v3hx\0A\00"
@fmt_v4 = private unnamed_addr addrspace(4) constant [34 x i8] c"v4 x i8: %v4hhd; v4 x half: %v4g\0A\00"
@fmt_v8 = private unnamed_addr addrspace(4) constant [37 x i8] c"v8 x i32: %v8x; v8 x double: %.2v8e\0A\00"
@fmt_v16 = private unnamed_addr addrspace(4) constant [19 x i8] c"v16 x i16: %v16hu\0A\00"

declare void @lgc.debug.printf(ptr addrspace(7), ptr addrspace(4), ...)

define void @main(ptr addrspace(7) %buf, i32 %id) {
entry:
  ; Values derived from the invocation ID: odd, big = (id + 1) * 1000003, signed = -42 - big.
  %odd = trunc i32 %id to i1
  %next = add i32 %id, 1
  %big = mul i32 %next, 1000003
  %signed = sub i32 -42, %big
  %byte = trunc i32 %signed to i8
  %id8 = trunc i32 %id to i8
  %letter8 = add i8 %id8, 65
  %letter = add i32 %id, 97
  %short = trunc i32 %signed to i16
  %wide.base = sext i32 %signed to i64
  %wide = mul i64 %wide.base, 10000000000
  %quarter = sitofp i32 %id to float
  %scaled = fmul float %quarter, 2.500000e-01
  %small = fsub float %scaled, 3.000000e+00
  %h = fptrunc float %small to half
  %signed.f = sitofp i32 %signed to float
  %f = fdiv float %signed.f, 7.000000e+00
  %signed.d = sitofp i32 %signed to double
  %d = fdiv double %signed.d, 3.000000e+00

  ; Scalars.
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt_i1, i1 %odd, i1 true)
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt_i8, i8 %byte, i8 %byte, i8 %byte, i8 %byte, i8 %byte, i8 %letter8)
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt_i16, i16 %short, i16 %short, i16 %short, i16 %short)
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt_i32, i32 %signed, i32 %big, i32 %signed, i32 %big, i32 %signed, i32 %big, i32 %big, i32 %big, i32 %signed, i32 %id, i32 %signed, i32 %letter)
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt_i64, i64 %wide, i64 %wide, i64 %wide, i64 %wide, i64 %wide)
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt_half, half %h, half %h, half %h, half %h)
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt_float, float %f, float %f, float %f, float %f, float %f)
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt_double, double %d, double %d, double %d, double %d, double %d, double %d, double %d)

  ; Vectors: constants with one lane taken from the values above.
  %v2i1 = insertelement <2 x i1> <i1 false, i1 true>, i1 %odd, i32 0
  %v2i64 = insertelement <2 x i64> <i64 0, i64 -1>, i64 %wide, i32 0
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt_v2, <2 x i1> %v2i1, <2 x i64> %v2i64)
  %v3f32 = insertelement <3 x float> <float 1.500000e+00, float 0.000000e+00, float -2.250000e+00>, float %f, i32 1
  %v3i16 = insertelement <3 x i16> <i16 1, i16 -2, i16 0>, i16 %short, i32 2
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt_v3, <3 x float> %v3f32, <3 x i16> %v3i16)
  %v4i8 = insertelement <4 x i8> <i8 -1, i8 0, i8 127, i8 0>, i8 %byte, i32 3
  %v4f16 = insertelement <4 x half> <half 0xH0000, half 0xHC000, half 0xH3800, half 0xH7BFF>, half %h, i32 0
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt_v4, <4 x i8> %v4i8, <4 x half> %v4f16)
  %v8i32 = insertelement <8 x i32> <i32 0, i32 1, i32 2, i32 3, i32 4, i32 5, i32 6, i32 0>, i32 %big, i32 7
  %v8f64 = insertelement <8 x double> <double 0.0, double 1.0, double -1.0, double 0.5, double 1.0e+100, double 1.0e-100, double 3.0, double 4.0>, double %d, i32 0
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt_v8, <8 x i32> %v8i32, <8 x double> %v8f64)
  %v16i16 = insertelement <16 x i16> <i16 0, i16 1, i16 2, i16 3, i16 4, i16 5, i16 6, i16 7, i16 8, i16 9, i16 10, i16 11, i16 12, i16 13, i16 -1, i16 0>, i16 %short, i32 15
  call void (ptr addrspace(7), ptr addrspace(4), ...) @lgc.debug.printf(ptr addrspace(7) %buf, ptr addrspace(4) @fmt_v16, <16 x i16> %v16i16)
  ret void
}
