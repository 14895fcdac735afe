/* A perf map naming executable anonymous memory (preload-tests/symbols.rs):
 * writes an x86-64 function into an anonymous PROT_EXEC mapping that calls
 * malloc(4242) through a register, names it in /tmp/perf-<pid>.map, calls it
 * and keeps the block (`nomap`: without the map file). The test removes the
 * map file afterwards. Prints the pid on stdout. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void *keep[4];

int main(int argc, char **argv) {
    int write_map = !(argc > 1 && argv[1][0] == 'n'); /* `nomap`: no perf map */
    unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (code == MAP_FAILED)
        return 3;
    void *(*m)(size_t) = malloc;
    uint64_t target = (uint64_t)(uintptr_t)m;
    unsigned char fn[] = {
        0x55,                                     /* push rbp */
        0x48, 0x89, 0xe5,                         /* mov rbp, rsp */
        0x48, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0,       /* mov rax, imm64 */
        0xbf, 0x92, 0x10, 0x00, 0x00,             /* mov edi, 4242 */
        0xff, 0xd0,                               /* call rax */
        0x5d,                                     /* pop rbp */
        0xc3,                                     /* ret */
    };
    memcpy(fn + 6, &target, 8);
    unsigned char *start = code + 64; /* not at the mapping's start */
    memcpy(start, fn, sizeof fn);
    __builtin___clear_cache((char *)start, (char *)start + sizeof fn);

    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    if (write_map) {
        FILE *f = fopen(path, "w");
        if (!f)
            return 4;
        fprintf(f, "%lx %zx jitted_alloc\n", (unsigned long)(uintptr_t)start, sizeof fn);
        fclose(f);
    }

    void *(*jitted)(void) = (void *(*)(void))start;
    for (int i = 0; i < 3; i++)
        keep[i] = jitted();
    printf("%d\n", (int)getpid());
    fflush(stdout);
    return keep[0] && keep[1] && keep[2] ? 0 : 5;
}
