/* Calls kill(getpid(), 0) and setuid(getuid()), and says it returned. */
#include <signal.h>
#include <unistd.h>

int main(void) {
    int k = kill(getpid(), 0);
    int s = setuid(getuid());
    (void)!write(1, k == 0 && s == 0 ? "done\n" : "failed\n", k == 0 && s == 0 ? 5 : 7);
    return 0;
}
