/* The ways a CPU can run a workgroup's invocations that meet at a barrier, on bench_workgroups.py's
 * kernel (each invocation stores a mix of its ID in its slot of a shared tile, meets the barrier, and
 * stores its right neighbour's slot plus its local index): for docs/devices.md's choice.
 *
 *   plain loop   the kernel without its barrier, one loop (the reference; not what a GPU computes)
 *   loops        work-item loops split at the barrier (POCL's; what the lowering makes of it)
 *   fibers       a ucontext fiber an invocation, switched at the barrier (swapcontext)
 *   switches     the same with a hand-written x86-64 stack switch (callee-saved registers only, no
 *                signal mask: what Boost.Context's fcontext does)
 *   threads      an OS thread an invocation of a workgroup, meeting at a pthread_barrier
 *
 * One thread runs the workgroups (the threads alternative: the workgroup's own threads). Each result is
 * checked against the loops'. Built by bench_workgroups.py: cc -O2 -pthread.
 *
 *   workgroup_alternatives INVOCATIONS SIZE REPEAT */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

static uint32_t *out, *expected;
static uint32_t tile[1024];
static unsigned size;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static inline void before(uint32_t id, uint32_t local) {
    uint32_t hash = id * 2654435761u;
    tile[local] = hash ^ (hash >> 15);
}

static inline void after(uint32_t id, uint32_t local) {
    uint32_t right = local + 1 == size ? 0 : local + 1;
    out[id] = tile[right] + local;
}

static void plain(uint32_t invocations) {
    for (uint32_t first = 0; first < invocations; first += size)
        for (uint32_t local = 0; local < size; local++) {
            before(first + local, local);
            after(first + local, local);
        }
}

static void loops(uint32_t invocations) {
    for (uint32_t first = 0; first < invocations; first += size) {
        for (uint32_t local = 0; local < size; local++) before(first + local, local);
        for (uint32_t local = 0; local < size; local++) after(first + local, local);
    }
}

/* Fibers: each runs one invocation, swapping back to the scheduler at the barrier. */
enum { FIBER_STACK = 16384 };
static ucontext_t scheduler, *fibers;
static char *stacks;
static uint32_t fiber_first;

static void fiber(int local) {
    before(fiber_first + local, local);
    swapcontext(&fibers[local], &scheduler); /* the barrier */
    after(fiber_first + local, local);
}

static void run_fibers(uint32_t invocations) {
    for (fiber_first = 0; fiber_first < invocations; fiber_first += size) {
        for (unsigned local = 0; local < size; local++) {
            getcontext(&fibers[local]);
            fibers[local].uc_stack.ss_sp = stacks + (size_t) local * FIBER_STACK;
            fibers[local].uc_stack.ss_size = FIBER_STACK;
            fibers[local].uc_link = &scheduler;
            makecontext(&fibers[local], (void (*)(void)) fiber, 1, (int) local);
        }
        for (int round = 0; round < 2; round++)
            for (unsigned local = 0; local < size; local++) swapcontext(&scheduler, &fibers[local]);
    }
}

#if defined(__x86_64__)
/* switch_stack(&from, to): save the callee-saved registers on this stack, its pointer in *from; load
 * `to`'s and return into it. A fresh stack holds six zero registers and the address of `start`. */
void switch_stack(void **from, void *to);
__asm__(".text\n.globl switch_stack\nswitch_stack:\n"
        "  push %rbp\n  push %rbx\n  push %r12\n  push %r13\n  push %r14\n  push %r15\n"
        "  mov %rsp, (%rdi)\n  mov %rsi, %rsp\n"
        "  pop %r15\n  pop %r14\n  pop %r13\n  pop %r12\n  pop %rbx\n  pop %rbp\n  ret\n");

static void *scheduler_stack, **fiber_stacks;
static uint32_t running;

static void start(void) {
    uint32_t local = running;
    before(fiber_first + local, local);
    switch_stack(&fiber_stacks[local], scheduler_stack); /* the barrier */
    after(fiber_first + local, local);
    switch_stack(&fiber_stacks[local], scheduler_stack); /* done: never resumed */
}

static void run_switches(uint32_t invocations) {
    for (fiber_first = 0; fiber_first < invocations; fiber_first += size) {
        for (unsigned local = 0; local < size; local++) {
            /* `start` is entered as after a call: its stack pointer 8 past a 16-byte boundary */
            void **top = (void **) (stacks + (size_t) (local + 1) * FIBER_STACK) - 1;
            *--top = (void *) start;
            for (int n = 0; n < 6; n++) *--top = 0;
            fiber_stacks[local] = top;
        }
        for (int round = 0; round < 2; round++)
            for (running = 0; running < size; running++)
                switch_stack(&scheduler_stack, fiber_stacks[running]);
    }
}
#endif

/* Threads: a workgroup's invocations are `size` threads that meet at a barrier. */
static pthread_barrier_t barrier;
static uint32_t thread_invocations;

static void *thread(void *argument) {
    uint32_t local = (uint32_t) (uintptr_t) argument;
    for (uint32_t first = 0; first < thread_invocations; first += size) {
        before(first + local, local);
        pthread_barrier_wait(&barrier);
        after(first + local, local);
        pthread_barrier_wait(&barrier); /* the workgroup ends: its tile is the next one's */
    }
    return NULL;
}

static void run_threads(uint32_t invocations) {
    pthread_t *threads = calloc(size, sizeof *threads);
    thread_invocations = invocations;
    pthread_barrier_init(&barrier, NULL, size);
    for (unsigned local = 0; local < size; local++)
        pthread_create(&threads[local], NULL, thread, (void *) (uintptr_t) local);
    for (unsigned local = 0; local < size; local++) pthread_join(threads[local], NULL);
    pthread_barrier_destroy(&barrier);
    free(threads);
}

static double best(void (*run)(uint32_t), uint32_t invocations, int repeat, int check) {
    double fastest = 1e30;
    for (int n = 0; n < repeat; n++) {
        memset(out, 0, sizeof *out * invocations);
        double start = now();
        run(invocations);
        double took = now() - start;
        if (took < fastest) fastest = took;
        if (check && memcmp(out, expected, sizeof *out * invocations) != 0) {
            fprintf(stderr, "wrong result\n");
            exit(1);
        }
    }
    return fastest;
}

int main(int argc, char **argv) {
    uint32_t invocations = argc > 1 ? (uint32_t) strtoul(argv[1], NULL, 0) : 1u << 20;
    size = argc > 2 ? (unsigned) strtoul(argv[2], NULL, 0) : 256;
    int repeat = argc > 3 ? atoi(argv[3]) : 5;
    invocations -= invocations % size;
    uint32_t few = invocations < (1u << 14) ? invocations : 1u << 14; /* threads: a part, scaled */
    out = calloc(invocations, sizeof *out);
    expected = calloc(invocations, sizeof *expected);
    fibers = calloc(size, sizeof *fibers);
#if defined(__x86_64__)
    fiber_stacks = calloc(size, sizeof *fiber_stacks);
#endif
    stacks = malloc((size_t) size * FIBER_STACK);
    loops(invocations);
    memcpy(expected, out, sizeof *out * invocations);
    double reference = best(plain, invocations, repeat, 0) / invocations;
    struct {
        const char *name;
        double seconds;
    } rows[] = {
        {"plain loop (no barrier)", reference},
        {"work-item loops", best(loops, invocations, repeat, 1) / invocations},
        {"fibers (swapcontext)", best(run_fibers, invocations, repeat, 1) / invocations},
#if defined(__x86_64__)
        {"fibers (stack switch)", best(run_switches, invocations, repeat, 1) / invocations},
#endif
        {"OS threads", best(run_threads, few, repeat < 2 ? repeat : 2, 1) / few},
    };
    printf("in C, one core, %u invocations in workgroups of %u (threads: %u, scaled), best of %d\n",
           invocations, size, few, repeat);
    printf("%-26s %12s %10s\n", "alternative", "ns/invocation", "ratio");
    for (size_t n = 0; n < sizeof rows / sizeof *rows; n++)
        printf("%-26s %12.2f %9.1fx\n", rows[n].name, rows[n].seconds * 1e9, rows[n].seconds / reference);
    return 0;
}
