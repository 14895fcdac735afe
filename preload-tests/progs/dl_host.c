/* A C program (no libstdc++) that dlopens the C++ library given as argv[1]
 * RTLD_LOCAL and calls into it. Checks that dlerror() has no stale message
 * after its own successful calls: a preload that looks for operator new
 * with dlsym and leaves the failure behind would show here. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;
static void check(int ok, const char *what, const char *detail) {
    printf("%s: %s%s%s\n", ok ? "ok" : "FAIL", what, detail ? " -- " : "", detail ? detail : "");
    if (!ok) failures++;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    check(dlopen("libstdc++.so.6", RTLD_NOW | RTLD_NOLOAD) == NULL, "no libstdc++ before the dlopen", NULL);
    dlerror();
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    check(h != NULL, "dlopen of the C++ library", h ? NULL : dlerror());
    if (!h) return 1;
    const char *e = dlerror();
    check(e == NULL, "dlerror() after a successful dlopen is NULL", e);
    int (*run)(void) = (int (*)(void))dlsym(h, "dl_lib_run");
    e = dlerror();
    check(run != NULL && e == NULL, "dlsym(dl_lib_run) and dlerror() is NULL", e);
    if (!run) return 1;
    int r = run();
    printf("dl_lib_run returned %d\n", r);
    e = dlerror();
    check(e == NULL, "dlerror() after calling into the library (operator new) is NULL", e);
    void *m = malloc(1234);
    free(m);
    e = dlerror();
    check(e == NULL, "dlerror() after malloc/free is NULL", e);
    /* The library stays loaded until exit. */
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
