/* For `heaplive attach` (preload-tests/attach.rs): started WITHOUT the
 * preload. Allocates 64 MiB at first_site, says "ready", waits for a byte
 * on stdin (the test attaches meanwhile), allocates 32 MiB at second_site
 * and frees half of the first, says "allocated", waits for a byte (the test
 * dumps), frees nothing more, prints a checksum and exits with status 7.
 * With argument "threads", 8 threads allocate and free small blocks from
 * the start until after second_site's allocations (during the attach). */
#include "sig_common.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sites.h"

#define MB (1024 * 1024)
static atomic_int stop;
static unsigned long churned[8];
static volatile sig_atomic_t usr2;
static void on_usr2(int sig) {
    (void)sig;
    usr2++;
}

FILLED_SITE(first_site, 1, n)
FILLED_SITE(second_site, 2, n)
__attribute__((noinline)) void *thread_churn(void *arg) {
    long i = (long)arg;
    while (!atomic_load(&stop)) {
        char *p = malloc(64 + (churned[i] % 512));
        p[0] = 1;
        churned[i] += p[0];
        free(p);
    }
    return NULL;
}
static void wait_byte(void) {
    char c;
    if (read(0, &c, 1) != 1) exit(3);
}
int main(int argc, char **argv) {
    int threads = argc > 1 && strcmp(argv[1], "threads") == 0;
    int handler = argc > 1 && strcmp(argv[1], "handler") == 0;
    if (handler) {
        on_signal(SIGUSR2, on_usr2, SA_RESTART);
        block_signal(SIGUSR1);
    }
    pthread_t t[8];
    static char *a[64], *b[32];
    for (int i = 0; i < 64; i++) a[i] = first_site(MB);
    if (threads)
        for (long i = 0; i < 8; i++) pthread_create(&t[i], NULL, thread_churn, (void *)i);
    printf("ready\n");
    fflush(stdout);
    wait_byte();
    for (int i = 0; i < 32; i++) b[i] = second_site(MB);
    for (int i = 0; i < 32; i++) free(a[i]);
    if (threads) {
        atomic_store(&stop, 1);
        for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    }
    printf("allocated\n");
    fflush(stdout);
    wait_byte();
    long sum = 0;
    for (int i = 32; i < 64; i++) sum += a[i][i];
    for (int i = 0; i < 32; i++) sum += b[i][i];
    printf("done %ld threads %d\n", sum, threads);
    if (handler) printf("usr2 %d\n", (int)usr2);
    return 7;
}
