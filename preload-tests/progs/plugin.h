/* The plugin library of the unwind_ programs (unwind_lib.c): loaded with
 * dlopen, its plugin_alloc called, closed again. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *(*plugin_fn)(void);

/* dlopen's `lib` (RTLD_NOW | RTLD_LOCAL) into *h and its plugin_alloc;
 * exits with status 2 if dlopen fails, 3 if dlsym does. */
static plugin_fn open_plugin(const char *lib, void **h) {
    *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!*h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        exit(2);
    }
    plugin_fn f = (plugin_fn)dlsym(*h, "plugin_alloc");
    if (!f) exit(3);
    return f;
}
