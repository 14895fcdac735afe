/* Leaks a little, then lives until heaplive has written two dumps
 * (HEAPLIVE_DUMP_EVERY=1: two periodic ones), however long a loaded
 * machine makes that take (up to 120 s, then it says so and exits). */
#include "sig_common.h"

static void *volatile keep;
__attribute__((noinline)) void periodic_leak(void) { keep = malloc(250000); }

int main(void) {
    periodic_leak();
    int i = 0;
    while (status_dumps() < 2 && i++ < 12000) sleep_ms(10);
    if (status_dumps() < 2)
        fprintf(stderr, "prog: 120 s and only %d dumps\n", status_dumps());
    printf("done\n");
    return 0;
}
