/* Leaks a little, then lives about 3.5 s (HEAPLIVE_DUMP_EVERY=1). */
#include "sig_common.h"

static void *volatile keep;
__attribute__((noinline)) void periodic_leak(void) { keep = malloc(250000); }

int main(void) {
    periodic_leak();
    sleep_ms(3500);
    printf("done\n");
    return 0;
}
