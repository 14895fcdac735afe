// A C++ program (it throws, so libstdc++ is loaded and its emergency
// exception pool allocated at load) that leaves `argv[1]` blocks of 5001
// bytes live at exit (kept in a global, so nothing optimizes them away).
// With a second argument `fork`, a forked child does the same and exits,
// and the parent exits after it with nothing of its own live.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

char *kept[16];

__attribute__((noinline)) void keep_blocks(int n) {
    for (int i = 0; i < n && i < 16; i++) {
        kept[i] = new char[5001];
        memset(kept[i], 1, 5001);
    }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 0;
    try {
        throw std::runtime_error("thrown and caught");
    } catch (const std::exception &e) {
        std::fputs(e.what(), stderr);
        std::fputs("\n", stderr);
    }
    if (argc > 2 && strcmp(argv[2], "fork") == 0) {
        pid_t c = fork();
        if (c < 0)
            return 1;
        if (c > 0) {
            int st = 0;
            waitpid(c, &st, 0);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
        }
    }
    keep_blocks(n);
    return 0;
}
