/* Leak-warning scenarios for preload-tests/leaks.rs. One distinct stack per
 * role (noinline functions, one call site each), so each warns on its own:
 *   leak_grow steps BLOCK [PAUSE_MS] grow_alloc to 1,2,4,8 MiB in steps
 *                                    PAUSE_MS (400) apart;
 *                                    flat_alloc to 1.5 MiB, then churn flat;
 *                                    small_alloc to 512 KiB
 *   leak_grow sampled BLOCK [PAUSE]  the same shape at 16x: grow to 16..128 MiB,
 *                                    flat 24 MiB, small 1 MiB
 *   leak_grow threads WAIT_MS        16 threads cross 1 MiB at once (64 KiB
 *                                    blocks, own stack each by recursion depth);
 *                                    then, if WAIT_MS > 0, sleep WAIT_MS and
 *                                    main_alloc crosses 1 MiB too
 *   leak_grow closed                 close(2), grow past 1 MiB, exit 7
 *   leak_grow reuse FILE             close(2), open FILE (gets fd 2), grow, exit 7
 *   leak_grow closeall FILE          grow to 1 MiB, close fds 3..63, open FILE
 *                                    and FILE.2 (the lowest free numbers),
 *                                    grow to 2 MiB
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXB 8192
void *grown[MAXB];
void *flat[MAXB];
void *small[MAXB];
void *mainb[64];
void *thr[16][16];
volatile int sink;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Does the file at PATH contain WHAT? (read with open/read: no stdio) */
static int file_has(const char *path, const char *what) {
    static char buf[65536];
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    return strstr(buf, what) != NULL;
}

__attribute__((noinline)) void *grow_alloc(size_t n) { void *p = malloc(n); sink++; return p; }
__attribute__((noinline)) void *flat_alloc(size_t n) { void *p = malloc(n); sink++; return p; }
__attribute__((noinline)) void *small_alloc(size_t n) { void *p = malloc(n); sink++; return p; }
__attribute__((noinline)) void *main_alloc(size_t n) { void *p = malloc(n); sink++; return p; }
__attribute__((noinline)) void *thread_alloc(size_t n) { void *p = malloc(n); sink++; return p; }

/* One call site per role: every block of a role has the same stack. */
static int n_grown;
__attribute__((noinline)) void grow_to(size_t total, size_t block) {
    while ((size_t)n_grown * block < total && n_grown < MAXB)
        grown[n_grown++] = grow_alloc(block);
    sink++;
}
__attribute__((noinline)) void make_flat(size_t total, size_t block, int churn) {
    int nb = (int)(total / block);
    for (int i = 0; i < nb + churn && i < MAXB; i++) {
        int slot = i < nb ? i : nb - 1;
        if (i >= nb)
            free(flat[slot]);
        flat[slot] = flat_alloc(block);
    }
    sink++;
}
__attribute__((noinline)) void make_small(size_t total, size_t block) {
    for (int n = 0; (size_t)n * block < total && n < MAXB; n++)
        small[n] = small_alloc(block);
    sink++;
}

static void steps(size_t unit, size_t block, long pause) {
    make_flat(24 * unit / 16, block, 20); /* 1.5 units, then 20 free+malloc */
    make_small(unit / 2, block);
    sleep_ms(pause);
    for (size_t t = unit; t <= 8 * unit; t *= 2) {
        grow_to(t, block);
        sleep_ms(pause);
    }
}

static pthread_barrier_t barrier;

/* The wait is out of line so that the compiler keeps one call site of
 * thread_alloc (with the branch inline it peels the last iteration). */
__attribute__((noinline)) void wait_before_last(int i) {
    if (i == 15)
        pthread_barrier_wait(&barrier);
    sink++;
}
__attribute__((noinline)) void thread_leaf(int idx) {
    for (int i = 0; i < 16; i++) {
        wait_before_last(i);
        thr[idx][i] = thread_alloc(65536);
    }
    sink++;
}
__attribute__((noinline)) void rec(int depth, int idx) {
    if (depth > 0)
        rec(depth - 1, idx);
    else
        thread_leaf(idx);
    sink++;
}
static void *thread_main(void *arg) {
    int idx = (int)(long)arg;
    rec(idx, idx);
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "steps";
    if (!strcmp(mode, "steps")) {
        steps(1 << 20, argc > 2 ? strtoul(argv[2], 0, 0) : 65536, argc > 3 ? atol(argv[3]) : 400);
    } else if (!strcmp(mode, "sampled")) {
        steps(16 << 20, argc > 2 ? strtoul(argv[2], 0, 0) : 65536, argc > 3 ? atol(argv[3]) : 400);
    } else if (!strcmp(mode, "threads")) {
        long wait = argc > 2 ? atol(argv[2]) : 0;
        pthread_t t[16];
        pthread_barrier_init(&barrier, NULL, 16);
        for (long i = 0; i < 16; i++)
            pthread_create(&t[i], NULL, thread_main, (void *)i);
        for (int i = 0; i < 16; i++)
            pthread_join(t[i], NULL);
        if (wait > 0) {
            sleep_ms(wait);
            for (int i = 0; i < 16; i++)
                mainb[i] = main_alloc(65536);
            sleep_ms(400);
        }
    } else if (!strcmp(mode, "closed")) {
        close(2);
        grow_to(2 << 20, 65536);
        sleep_ms(600);
        exit(7);
    } else if (!strcmp(mode, "reuse")) {
        close(2);
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd != 2)
            return 3;
        write(2, "program data\n", 13);
        grow_to(2 << 20, 65536);
        sleep_ms(600);
        write(2, "program end\n", 12);
        exit(7);
    } else if (!strcmp(mode, "closeall")) {
        /* A daemon-like program: warns once, then closes every descriptor
         * above 2 and opens FILE (which gets the lowest free number), then
         * warns again. */
        grow_to(1 << 20, 65536);
        /* Until heaplive's thread has written the warning: a descriptor it
         * holds for a moment while it works (a debug file, /proc) would
         * otherwise be closed by the loop below, and its number, reused for
         * FILE, closed again by heaplive when it is done with it, as a
         * program that closes descriptors it did not open does to any
         * library's thread. */
        const char *log = getenv("HEAPLIVE_LOG");
        for (int i = 0; log && i < 6000 && !file_has(log, "possible leak"); i++)
            sleep_ms(10);
        for (int fd = 3; fd < 64; fd++)
            close(fd);
        char second[4096];
        snprintf(second, sizeof second, "%s.2", argv[2]);
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fd2 = open(second, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || fd2 < 0)
            return 3;
        write(fd, "program data\n", 13);
        write(fd2, "program data\n", 13);
        grow_to(2 << 20, 65536);
        sleep_ms(600);
        write(fd, "program end\n", 12);
        write(fd2, "program end\n", 12);
        close(fd);
        close(fd2);
    } else {
        return 2;
    }
    printf("done\n");
    return 0;
}
