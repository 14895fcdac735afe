/* JIT code whose unwind information is registered with libgcc_s
 * (__register_frame), as LLVM's JIT does: main -> jit code -> jit_site ->
 * malloc(4242). Only the libgcc_s the frame was registered with can walk
 * through the JIT frame to main; heaplive must use the program's libgcc_s
 * (linked with -lgcc_s), not the unwinder linked into heaplive. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

extern void __register_frame(void *);
extern void __deregister_frame(void *);

void *volatile kept;

__attribute__((noinline)) void *jit_site(size_t n) {
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* push rbp; mov rbp,rsp; mov rax,rdi; mov rdi,rsi; call rax; pop rbp; ret */
static const unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0xf8,
                                     0x48, 0x89, 0xf7, 0xff, 0xd0, 0x5d, 0xc3};

static unsigned char eh[128] __attribute__((aligned(8)));

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

static void build_eh_frame(uintptr_t begin, size_t len) {
    unsigned char *p = eh;
    /* CIE: version 1, "zR", code align 1, data align -8, RA = r16,
     * FDE pointers absolute; CFA = rsp + 8, RA at CFA - 8. */
    static const unsigned char cie[] = {0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x00,
                                        0x0c, 7, 8, 0x90, 1, 0, 0};
    put32(p, sizeof cie);
    memcpy(p + 4, cie, sizeof cie);
    unsigned char *fde = p + 4 + sizeof cie;
    /* FDE: after push rbp CFA = rsp + 16, rbp at CFA - 16; after mov rbp,rsp
     * CFA = rbp + 16; after pop rbp CFA = rsp + 8. */
    static const unsigned char ins[] = {0, 0x41, 0x0e, 16, 0x86, 2, 0x43, 0x0d, 6,
                                        0x49, 0x0c, 7, 8, 0, 0, 0};
    uint32_t flen = 4 + 8 + 8 + sizeof ins;
    put32(fde, flen);
    put32(fde + 4, (uint32_t)(fde + 4 - p));
    put64(fde + 8, begin);
    put64(fde + 16, len);
    memcpy(fde + 24, ins, sizeof ins);
    put32(fde + 4 + flen, 0);
}

int main(void) {
    unsigned char *mem = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return 2;
    memcpy(mem, code, sizeof code);
    if (mprotect(mem, 4096, PROT_READ | PROT_EXEC) != 0) return 2;
    build_eh_frame((uintptr_t)mem, sizeof code);
    __register_frame(eh);
    void *(*jit)(void *(*)(size_t), size_t) = (void *(*)(void *(*)(size_t), size_t))mem;
    kept = jit(jit_site, 4242);
    __deregister_frame(eh);
    puts(kept ? "done" : "failed");
    return 0;
}
