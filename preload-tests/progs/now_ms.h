/* now_ms: milliseconds by the coarse monotonic clock (a vDSO read, no
 * allocation). For report_grow.c and timeline_steps.c. */
#include <time.h>

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
