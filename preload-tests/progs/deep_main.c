/* argv[1]: mode "deepbind" or "dlclose"; argv[2]: the library; argv[3]:
 * optional second library (dlopen'ed with RTLD_DEEPBIND too). */
#include "sig_common.h"
#include <dlfcn.h>

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int deep = strcmp(argv[1], "deepbind") == 0;
    void *h = dlopen(argv[2], RTLD_NOW | (deep ? RTLD_DEEPBIND : RTLD_LOCAL));
    if (!h) {
        printf("dlopen: %s\n", dlerror());
        return 3;
    }
    void *(*alloc)(size_t) = (void *(*)(size_t))dlsym(h, "deep_alloc");
    if (!alloc) return 4;
    alloc(deep ? 777777 : 555555);
    if (argc > 3) {
        void *h2 = dlopen(argv[3], RTLD_NOW | RTLD_DEEPBIND);
        if (!h2) {
            printf("dlopen 2: %s\n", dlerror());
            return 5;
        }
        void *(*alloc2)(size_t) = (void *(*)(size_t))dlsym(h2, "deep_alloc");
        alloc2(111111);
    }
    if (!deep) {
        if (dlclose(h) != 0) {
            printf("dlclose: %s\n", dlerror());
            return 6;
        }
        void *again = dlopen(argv[2], RTLD_NOW | RTLD_NOLOAD);
        printf("unloaded %s\n", again ? "no" : "yes");
    } else {
        printf("loaded\n");
    }
    return 0;
}
