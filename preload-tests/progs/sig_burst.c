/* 200 dump signals while 4 threads allocate and free as fast as they can. */
#include "sig_common.h"
#include <pthread.h>
#include <stdatomic.h>

static atomic_int stop;
static atomic_long ops;

__attribute__((noinline)) static void *churn(void *arg) {
    unsigned seed = (unsigned)(long)arg * 2654435761u + 1;
    void *slots[512] = {0};
    while (!atomic_load(&stop)) {
        seed = seed * 1103515245u + 12345u;
        unsigned i = (seed >> 8) % 512;
        free(slots[i]);
        size_t size = 16 + (seed >> 12) % 8192;
        slots[i] = malloc(size);
        if (!slots[i]) abort();
        memset(slots[i], 1, size < 64 ? size : 64);
        if ((seed & 0xff) == 0) {
            void *r = realloc(slots[i], size * 2);
            if (!r) abort();
            slots[i] = r;
        }
        atomic_fetch_add(&ops, 1);
    }
    for (int i = 0; i < 512; i++) free(slots[i]);
    return NULL;
}

int main(void) {
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, churn, (void *)i);
    sleep_ms(50);
    for (int i = 0; i < 200; i++) {
        signal_from_outside(SIGUSR2);
        if (i % 20 == 0) sleep_ms(1);
    }
    /* Keep allocating until at least one signal dump is out. */
    int ok = wait_dumps(1);
    sleep_ms(100);
    atomic_store(&stop, 1);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    printf("ops %ld dumped %d\n", atomic_load(&ops), ok);
    return 0;
}
