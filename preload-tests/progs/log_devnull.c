/* Keeps 1000 bytes live, then does what php-fpm does to its workers:
 * points fd 2 at /dev/null (services.rs: heaplive's lines must still reach
 * someone). With "close", closes fd 2 instead; with "keep", leaves it. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *keep;

int main(int argc, char **argv) {
    keep = malloc(1000);
    if (argc > 1 && strcmp(argv[1], "keep") == 0) {
        return 0;
    } else if (argc > 1 && strcmp(argv[1], "close") == 0) {
        close(2);
    } else if (argc == 1) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 2);
        close(fd);
    }
    return 0;
}
