/* Counts the process's threads when its constructor runs, with system calls
   only (nothing allocated): heaplive's thread must not have been started
   from ld.so's own allocations while it was loading this library. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int threads_at_init = -1;

__attribute__((constructor)) static void
count_threads (void)
{
  char b[4096];
  int fd = open ("/proc/self/status", O_RDONLY);
  if (fd < 0)
    return;
  ssize_t n = read (fd, b, sizeof b - 1);
  close (fd);
  if (n <= 0)
    return;
  b[n] = 0;
  char *p = strstr (b, "Threads:");
  if (p)
    threads_at_init = atoi (p + 8);
}
