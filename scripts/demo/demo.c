/* The program `make demo` profiles: a toy key-value server loop whose cache
 * keeps growing (a "leak"), next to a bounded session table and request
 * scratch memory that is freed. The flame graph should show the cache
 * holding most of the live memory. `demo MS` pauses MS milliseconds after
 * every 1,000 requests (scripts/report-screenshot.sh: a run of a few
 * seconds, for a timeline). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct entry { char *key; char *value; struct entry *next; };
static struct entry *cache;                 /* grows forever */
static char *sessions[64];                  /* bounded */

__attribute__((noinline)) static char *copy_value(const char *src, size_t n) {
    char *v = malloc(n);
    memset(v, 'v', n - 1);
    v[n - 1] = 0;
    (void)src;
    return v;
}

__attribute__((noinline)) static void cache_insert(int i) {
    struct entry *e = malloc(sizeof *e);
    char key[32];
    snprintf(key, sizeof key, "key-%d", i);
    e->key = strdup(key);
    e->value = copy_value(key, 2048 + (i % 7) * 512);
    e->next = cache;
    cache = e;
}

__attribute__((noinline)) static void session_touch(int i) {
    int slot = i % 64;
    free(sessions[slot]);
    sessions[slot] = calloc(1, 16384);
}

__attribute__((noinline)) static long handle_request(int i) {
    char *scratch = malloc(65536);          /* freed: never live at exit */
    memset(scratch, i, 65536);
    long sum = scratch[i % 65536];
    if (i % 3 == 0) cache_insert(i);
    session_touch(i);
    free(scratch);
    return sum;
}

int main(int argc, char **argv) {
    long sum = 0, pause_ms = argc > 1 ? atol(argv[1]) : 0;
    for (int i = 0; i < 30000; i++) {
        sum += handle_request(i);
        if (pause_ms > 0 && i % 1000 == 999) {
            struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    printf("demo: served 30000 requests (checksum %ld)\n", sum);
    return 0;
}
