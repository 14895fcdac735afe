// A stand-in for another ZendMM profiler (Datadog's, memprof, phpdbg): once
// PHP has started, it installs ZendMM custom handlers that count and call
// through, and leaves them installed. heaplive must see them and leave
// ZendMM alone. Preloaded before libheaplive.so.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stddef.h>

typedef void *(*alloc_fn)(size_t);
typedef void (*free_fn)(void *);
typedef void *(*realloc_fn)(void *, size_t);

static int (**post_startup)(void);
static int (*prev_post_startup)(void);
static void *(*get_heap)(void);
static void (*set_handlers)(void *, alloc_fn, free_fn, realloc_fn);
static void *(*mm_alloc)(void *, size_t);
static void (*mm_free)(void *, void *);
static void *(*mm_realloc)(void *, void *, size_t);
static void *heap;
static unsigned long allocs;
// PHP 7.4's CLI closes fd 2 at shutdown (its STDERR stream): the count is
// written to a copy of it taken at start.
static int err_fd = 2;

static void *h_alloc(size_t n) {
    int saved = *(int *)heap;
    *(int *)heap = 0;
    void *p = mm_alloc(heap, n);
    *(int *)heap = saved;
    allocs++;
    return p;
}
// ZendMM's full shutdown hands the heap itself to _free: not a block.
static void h_free(void *p) { if (p != heap) mm_free(heap, p); }
static void *h_realloc(void *p, size_t n) {
    int saved = *(int *)heap;
    *(int *)heap = 0;
    void *q = mm_realloc(heap, p, n);
    *(int *)heap = saved;
    return q;
}

static int hooker_post_startup(void) {
    int rc = prev_post_startup ? prev_post_startup() : 0;
    heap = get_heap();
    set_handlers(heap, h_alloc, h_free, h_realloc);
    return rc;
}

__attribute__((constructor)) static void init(void) {
    int fd = fcntl(2, F_DUPFD_CLOEXEC, 100);
    if (fd >= 0) err_fd = fd;
    post_startup = dlsym(RTLD_DEFAULT, "zend_post_startup_cb");
    get_heap = dlsym(RTLD_DEFAULT, "zend_mm_get_heap");
    set_handlers = dlsym(RTLD_DEFAULT, "zend_mm_set_custom_handlers");
    mm_alloc = dlsym(RTLD_DEFAULT, "_zend_mm_alloc");
    mm_free = dlsym(RTLD_DEFAULT, "_zend_mm_free");
    mm_realloc = dlsym(RTLD_DEFAULT, "_zend_mm_realloc");
    if (!post_startup || !get_heap || !set_handlers || !mm_alloc) return;
    prev_post_startup = *post_startup;
    *post_startup = hooker_post_startup;
}

__attribute__((destructor)) static void fini(void) {
    if (heap) dprintf(err_fd, "other-hooker: %lu allocations\n", allocs);
}
