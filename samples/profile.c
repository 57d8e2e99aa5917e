// profile.c: the source of samples/profile.ll, a shader to profile:
//   dprintf profile samples/profile.ll --invocations 64 --annotate
static float falloff(float distance) {
  return sqrtf(distance) * 0.25f;
}

void main(buffer_t printf_buffer, unsigned id) {
  unsigned steps = id % 8;
  float sum = 0.0f;
  for (unsigned i = 0; i < steps; ++i)
    sum = fmaf((float)i, 0.5f, sum);
  if (id % 3 == 0)
    sum += falloff(sum);
  if (id % 16 == 3)
    printf("invocation %u: sum %.2f\n", id, sum);
}
