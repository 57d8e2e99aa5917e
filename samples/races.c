// races.c: the source of samples/races.ll, a reduction into 64 partial sums, and its fixed twin:
//   dprintf run samples/races.ll --races --buffer 256 --invocations 256                # races
//   dprintf run samples/races.ll --races --buffer 256 --invocations 256 --entry fixed  # does not
void main(buffer_t printf_buffer, unsigned id, unsigned *partial) {
  partial[id % 64] += id;                   // 4 invocations a sum, a plain load and store: they race
}

void fixed(buffer_t printf_buffer, unsigned id, unsigned *partial) {
  atomic_fetch_add(&partial[id % 64], id);  // one atomic add each: no race
}
