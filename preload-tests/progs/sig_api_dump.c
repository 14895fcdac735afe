/* heaplive_dump() from C, found with dlsym so that the program also runs
 * without the library. argv[1]: the explicit path of the second dump. */
#include "sig_common.h"
#include <dlfcn.h>

extern int heaplive_dump(const char *path);

static void *volatile keep_a, *volatile keep_b;
__attribute__((noinline)) void api_leak_a(void) { keep_a = malloc(123456); }
__attribute__((noinline)) void api_leak_b(void) { keep_b = malloc(654321); }

int main(int argc, char **argv) {
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heaplive_dump");
    api_leak_a();
    if (!dump) {
        printf("no heaplive\n");
        free(keep_a);
        return 0;
    }
    int r1 = dump(NULL);
    api_leak_b();
    int r2 = dump(argc > 1 ? argv[1] : "explicit.folded");
    printf("r1 %d r2 %d\n", r1, r2);
    free(keep_a);
    free(keep_b);
    return 0;
}
