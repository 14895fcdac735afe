// For `heaplive attach` (preload-tests/attach.rs): attach_main.c's script
// with new[]/delete[] and a std::vector.
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <vector>

static const size_t MB = 1024 * 1024;

__attribute__((noinline)) char *first_site(size_t n) {
    char *p = new char[n];
    memset(p, 1, n);
    return p;
}
__attribute__((noinline)) std::vector<char> *second_site(size_t n) {
    return new std::vector<char>(n, 2);
}
static void wait_byte() {
    char c;
    if (read(0, &c, 1) != 1) _exit(3);
}
int main() {
    static char *a[64];
    static std::vector<char> *b[32];
    for (int i = 0; i < 64; i++) a[i] = first_site(MB);
    printf("ready\n");
    fflush(stdout);
    wait_byte();
    for (int i = 0; i < 32; i++) b[i] = second_site(MB);
    for (int i = 0; i < 32; i++) delete[] a[i];
    printf("allocated\n");
    fflush(stdout);
    wait_byte();
    long sum = 0;
    for (int i = 0; i < 32; i++) sum += (*b[i])[i] + a[32 + i][i];
    printf("done %ld\n", sum);
    return 7;
}
