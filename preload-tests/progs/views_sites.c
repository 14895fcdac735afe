/* Known allocation totals per call site, for the allocation and peak views.
 *   views_sites exact     : site_kept 100 x 1000 B kept, site_freed 50 x 3000 B
 *                           freed, site_realloc 10 reallocs growing 100..1000 B
 *                           (5500 B allocated) then freed.
 *   views_sites peak      : site_big 200 x 1 MiB, then frees all but 10 of them.
 *   views_sites grow N    : site_grow N x 64 KiB kept, in steps.
 *   views_sites dormant   : site_before 100 x 1000 B before heaplive_start(),
 *                           site_after 100 x 2000 B after it, frees of the
 *                           site_before blocks, heaplive_stop(), site_stopped
 *                           50 x 4000 B, heaplive_start(), site_again 10 x 5000 B.
 *   views_sites churn     : site_keep 32 MiB kept and site_churn 64 MiB allocated
 *                           and freed, in 1000-byte blocks.
 *   views_sites server    : site_before 100 x 1000 B, prints "ready", then per
 *                           line read from stdin: site_after 100 x 2000 B,
 *                           site_stopped 50 x 4000 B, site_again 10 x 5000 B.
 */
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sites.h"

int heaplive_start(void) __attribute__((weak));
int heaplive_stop(void) __attribute__((weak));

static void *volatile sink;

SITE(site_kept)
SITE(site_freed)
__attribute__((noinline)) void *site_realloc(void *p, size_t n) { return realloc(p, n); }
FILLED_SITE(site_big, 1, n)
SITE(site_small)
SITE(site_grow)
SITE(site_before)
SITE(site_after)
SITE(site_stopped)
SITE(site_again)
SITE(site_keep)
SITE(site_churn)

static void wait_line(void) {
    char buf[64];
    if (!fgets(buf, sizeof buf, stdin)) exit(3);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "exact";
    if (!strcmp(mode, "exact")) {
        static void *keep[100];
        for (int i = 0; i < 100; i++) keep[i] = site_kept(1000);
        for (int i = 0; i < 50; i++) { sink = site_freed(3000); free(sink); }
        void *r = NULL;
        for (int i = 1; i <= 10; i++) r = site_realloc(r, 100 * i);
        free(r);
        printf("exact done\n");
    } else if (!strcmp(mode, "peak")) {
        static void *big[200];
        static void *small[10];
        for (int i = 0; i < 10; i++) small[i] = site_small(1000);
        for (int i = 0; i < 200; i++) big[i] = site_big(1 << 20);
        for (int i = 10; i < 200; i++) free(big[i]);
        printf("peak done\n");
    } else if (!strcmp(mode, "grow")) {
        int n = argc > 2 ? atoi(argv[2]) : 1000;
        for (int i = 0; i < n; i++) { sink = site_grow(64 << 10); usleep(500); }
        printf("grow done\n");
    } else if (!strcmp(mode, "dormant")) {
        static void *before[100];
        for (int i = 0; i < 100; i++) before[i] = site_before(1000);
        printf("start %d\n", heaplive_start ? heaplive_start() : -1);
        for (int i = 0; i < 100; i++) sink = site_after(2000);
        for (int i = 0; i < 100; i++) free(before[i]);
        printf("stop %d\n", heaplive_stop ? heaplive_stop() : -1);
        for (int i = 0; i < 50; i++) sink = site_stopped(4000);
        printf("start %d\n", heaplive_start ? heaplive_start() : -1);
        for (int i = 0; i < 10; i++) sink = site_again(5000);
    } else if (!strcmp(mode, "churn")) {
        for (int i = 0; i < 32 * 1024 * 1024 / 1000; i++) sink = site_keep(1000);
        for (int i = 0; i < 64 * 1024 * 1024 / 1000; i++) { sink = site_churn(1000); free(sink); }
    } else if (!strcmp(mode, "server")) {
        for (int i = 0; i < 100; i++) sink = site_before(1000);
        printf("ready\n");
        fflush(stdout);
        wait_line();
        for (int i = 0; i < 100; i++) sink = site_after(2000);
        printf("after\n");
        fflush(stdout);
        wait_line();
        for (int i = 0; i < 50; i++) sink = site_stopped(4000);
        printf("stopped\n");
        fflush(stdout);
        wait_line();
        for (int i = 0; i < 10; i++) sink = site_again(5000);
    }
    return 0;
}
