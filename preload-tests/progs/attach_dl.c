/* For `heaplive attach` (preload-tests/attach.rs): after the attach,
 * dlopens libattach_dllib.so (argv[1]) and lets it allocate 32 MiB. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MB (1024 * 1024)
__attribute__((noinline)) void *first_site(size_t n) {
    char *p = malloc(n);
    memset(p, 1, n);
    return p;
}
static void wait_byte(void) {
    char c;
    if (read(0, &c, 1) != 1) exit(3);
}
int main(int argc, char **argv) {
    static char *a[64];
    for (int i = 0; i < 64; i++) a[i] = first_site(MB);
    printf("ready\n");
    fflush(stdout);
    wait_byte();
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        printf("dlopen: %s\n", dlerror());
        return 2;
    }
    void *(*lib_site)(size_t) = (void *(*)(size_t))dlsym(h, "lib_site");
    static void *b[32];
    for (int i = 0; i < 32; i++) b[i] = lib_site(MB);
    for (int i = 0; i < 32; i++) free(a[i]);
    printf("allocated\n");
    fflush(stdout);
    wait_byte();
    printf("done %d\n", ((char *)b[5])[5] + a[40][1]);
    return 7;
}
