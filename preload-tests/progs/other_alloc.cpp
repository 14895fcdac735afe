// Allocation sites with distinctive sizes, for a run where another
// allocator (jemalloc, tcmalloc) comes before heaplive in LD_PRELOAD
// (preload-tests/other_allocators.rs) or under an LD_AUDIT module. Each
// site_* function keeps its block live; the *_freed ones give theirs back.
// Prints a line and exits with status 3.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <new>

#define SITE extern "C" __attribute__((noinline))

static void *keep[64];
static int nkeep;

SITE void *site_malloc(void) { return malloc(10001); }
SITE void *site_calloc(void) { return calloc(7, 1429); }
SITE void *rg_origin(void) { return malloc(3001); }
SITE void *site_realloc(void *p) { return realloc(p, 20011); }
SITE void *site_posix_memalign(void) {
    void *p = nullptr;
    return posix_memalign(&p, 64, 10007) == 0 ? p : nullptr;
}
SITE void *site_aligned_alloc(void) { return aligned_alloc(256, 10496); }
SITE char *site_strdup(void) {
    char s[100];
    memset(s, 'x', 99);
    s[99] = 0;
    return strdup(s);
}
SITE void *site_malloc_freed(void) { return malloc(5555); }
struct Big {
    char b[4001];
};
SITE void *site_new(void) { return new Big; }
SITE void *site_new_array(void) { return new char[3003]; }
SITE void *site_new_freed(void) { return new char[2002]; }

int main(void) {
    keep[nkeep++] = site_malloc();
    keep[nkeep++] = site_calloc();
    keep[nkeep++] = site_realloc(rg_origin());
    keep[nkeep++] = site_posix_memalign();
    keep[nkeep++] = site_aligned_alloc();
    keep[nkeep++] = site_strdup();
    keep[nkeep++] = site_new();
    keep[nkeep++] = site_new_array();
    for (int i = 0; i < 10; i++) free(site_malloc_freed());
    for (int i = 0; i < 10; i++) delete[] static_cast<char *>(site_new_freed());
    int ok = 1;
    for (int i = 0; i < nkeep; i++) ok &= keep[i] != nullptr;
    printf("kept %d blocks, %s\n", nkeep, ok ? "all allocated" : "some failed");
    return 3;
}
