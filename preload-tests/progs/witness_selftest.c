/* Calls heaplive_witness_selftest (exported by lock-witness builds only),
 * which takes two locks out of rank order: the witness must abort. Without
 * it (the library people run): says so and exits 3. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
    free(malloc(100));
    void (*f)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "heaplive_witness_selftest");
    if (!f) { puts("no selftest"); return 3; }
    puts("calling the selftest");
    fflush(stdout);
    f();
    puts("returned");
    return 0;
}
