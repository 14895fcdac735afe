/* Loads argv[1] (a path) and then argv[2] (a bare name, found through
 * LD_LIBRARY_PATH) after start, then dlopens argv[1] again (a later dlopen),
 * and calls late_run in both. Prints what they kept; exits with status 5. */
#include <dlfcn.h>
#include <stdio.h>

static int run(void *h) {
    int (*f)(void) = (int (*)(void))dlsym(h, "late_run");
    return f ? f() : -1;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    void *a = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    void *b = dlopen(argv[2], RTLD_LAZY | RTLD_LOCAL);
    if (!a || !b) {
        printf("dlopen failed: %s\n", dlerror());
        return 1;
    }
    void *again = dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD);
    printf("kept %d and %d, again %s\n", run(a), run(b), again == a ? "same" : "other");
    return 5;
}
