/* A shared library whose function allocates for its caller (top --app,
 * preload-tests/top_app.rs): the blocks stay live to the exit dump. */
#include <pthread.h>
#include <stdlib.h>

/* Exported: a store the compiler cannot drop keeps each malloc. */
void *app_lib_kept[64];
int app_lib_nkept;

__attribute__((noinline)) void *lib_buffer(size_t n) {
    void *p = malloc(n);
    app_lib_kept[app_lib_nkept++] = p;
    return p;
}

/* A thread of the library's own: its stack has no frame of the executable. */
static void *lib_worker(void *arg) {
    (void)arg;
    app_lib_kept[app_lib_nkept++] = malloc(4096);
    return NULL;
}

__attribute__((noinline)) void lib_start_worker(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, lib_worker, NULL) == 0)
        pthread_join(t, NULL);
}
