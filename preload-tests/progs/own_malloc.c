// A program with its own malloc, free, calloc, realloc (and the aligned
// ones and malloc_usable_size): a bump allocator over a static arena, each
// block after a 16-byte header with its size. libc and everything else
// bind to these; heaplive can only say so
// (preload-tests/other_allocators.rs). Exits with status 7.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static _Alignas(4096) unsigned char arena[64 << 20];
static size_t used;

static void *bump(size_t size, size_t align) {
    if (align < 16) align = 16;
    size_t start = (used + 16 + align - 1) & ~(align - 1);
    if (size > sizeof arena || start + size > sizeof arena) {
        errno = ENOMEM;
        return NULL;
    }
    used = start + size;
    *(size_t *)(arena + start - 16) = size;
    return arena + start;
}

static int ours(void *p) { return (unsigned char *)p >= arena && (unsigned char *)p < arena + sizeof arena; }

void *malloc(size_t size) { return bump(size, 16); }
void free(void *p) { (void)p; }
void *calloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    return bump(n * size, 16); /* the arena is zero and never reused */
}
size_t malloc_usable_size(void *p) { return p && ours(p) ? *(size_t *)((unsigned char *)p - 16) : 0; }
void *realloc(void *p, size_t size) {
    void *q = bump(size, 16);
    if (q && p) {
        size_t old = malloc_usable_size(p);
        memcpy(q, p, old < size ? old : size);
    }
    return q;
}
int posix_memalign(void **out, size_t align, size_t size) {
    void *p = bump(size, align);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
void *aligned_alloc(size_t align, size_t size) { return bump(size, align); }
void *memalign(size_t align, size_t size) { return bump(size, align); }

__attribute__((noinline)) void *site_own(void) { return malloc(12345); }

int main(void) {
    char *p = site_own();
    memset(p, 1, 12345);
    char *s = strdup("hello from the program's own malloc");
    printf("%s, %zu bytes used\n", s, used > 12345 ? (size_t)12345 : used);
    return 7;
}
