/* Allocates far less than one sample interval: under the preload glibc
 * must still see one thread. argv[1] "exit": main ends with pthread_exit
 * after starting a thread that ends later; atexit handlers must run and the
 * process exit 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char __libc_single_threaded;
static void *volatile keep;

static void bye(void) { printf("atexit ran\n"); fflush(stdout); }
static void *later(void *a) {
    (void)a;
    usleep(300000);
    keep = malloc(100);
    return NULL;
}

int main(int argc, char **argv) {
    keep = malloc(1000);
    if (argc > 1 && !strcmp(argv[1], "exit")) {
        atexit(bye);
        pthread_t t;
        pthread_create(&t, NULL, later, NULL);
        printf("main leaves\n");
        fflush(stdout);
        pthread_exit(NULL);
    }
    printf("__libc_single_threaded = %d\n", (int)__libc_single_threaded);
    return 0;
}
