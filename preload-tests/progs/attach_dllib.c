/* The library attach_dl.c loads after the attach. */
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) void *lib_site(size_t n) {
    char *p = malloc(n);
    memset(p, 3, n);
    return p;
}
