/* A program that never creates a thread: glibc's __libc_single_threaded
   must read 1 after it has allocated (issue #18: a helper thread makes
   glibc take its multi-threaded paths, and makes fork from a signal
   handler unsafe). Its 64 blocks add up to 20 MiB, so that at the default
   interval (512 KiB) it samples in every run (no sample: e^-38): with the
   default dump signal heaplive's thread then starts and the flag reads 0
   (an earlier 2 MiB gave a run without a sample, and so 1, about one run in
   fifty). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>

int
main (void)
{
  void *keep[64];
  for (int i = 0; i < 64; i++)
    {
      keep[i] = malloc (24 + 10000 * i);
      memset (keep[i], 1, 24);
    }
  char *s = strdup ("single");
  s = realloc (s, 4096);
  printf ("__libc_single_threaded=%d\n", (int) __libc_single_threaded);
  free (s);
  for (int i = 0; i < 64; i++)
    free (keep[i]);
  return 0;
}
