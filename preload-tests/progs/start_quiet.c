/* A process that never reaches a sample (issue #13, target 4): with no
 * argument it calls no allocation function at all; with N it makes N small
 * allocations (far below a sample at the interval the test sets, unless the
 * test asks for exact mode) from `quiet_site`. At the end it reads
 * /proc/self/maps with plain system calls (no stdio, which would allocate)
 * and prints whether libgcc_s.so is mapped and whether glibc's malloc heap
 * ([heap]) exists. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char maps[1 << 20];

__attribute__((noinline)) void *quiet_site(size_t n) { return malloc(n); }

static void say(const char *s) { (void)!write(1, s, strlen(s)); }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 0;
    void *keep[1000];
    if (n > 1000) n = 1000;
    for (int i = 0; i < n; i++) keep[i] = quiet_site(24 + i % 40);
    int fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0) return 2;
    size_t len = 0;
    ssize_t r;
    while (len < sizeof maps - 1 && (r = read(fd, maps + len, sizeof maps - 1 - len)) > 0) len += r;
    close(fd);
    maps[len] = 0;
    say(strstr(maps, "/libgcc_s.so") ? "libgcc_s yes\n" : "libgcc_s no\n");
    say(strstr(maps, "[heap]") ? "heap yes\n" : "heap no\n");
    for (int i = 0; i < n; i++) free(keep[i]);
    return 0;
}
