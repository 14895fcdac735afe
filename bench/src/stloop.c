/* stloop: a single-threaded malloc/free loop, optionally with one idle
 * thread alive (the situation heaplive's own thread creates).
 *
 *   stloop OPS IDLE_THREADS
 *
 * OPS allocations over a window of 4096 slots, sizes 16..1024 bytes
 * (a fixed xorshift sequence), each freed when its slot is reused. With
 * IDLE_THREADS=1 a thread that only waits is started first: glibc then
 * takes its multi-threaded paths (arena locks, atomic tcache and stdio
 * locking), as it does when heaplive's thread exists. Prints a checksum. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *
idle (void *arg)
{
  (void) arg;
  for (;;)
    pause ();
  return NULL;
}

int
main (int argc, char **argv)
{
  long ops = argc > 1 ? atol (argv[1]) : 20000000;
  int threads = argc > 2 ? atoi (argv[2]) : 0;
  for (int i = 0; i < threads; i++)
    {
      pthread_t t;
      if (pthread_create (&t, NULL, idle, NULL) != 0)
        return 2;
    }
  enum { SLOTS = 4096 };
  static unsigned char *slot[SLOTS];
  unsigned long x = 88172645463325252UL, sum = 0;
  for (long i = 0; i < ops; i++)
    {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      unsigned s = x % SLOTS;
      free (slot[s]);
      size_t n = 16 + (x >> 20) % 1009;
      slot[s] = malloc (n);
      slot[s][0] = (unsigned char) i;
      sum += slot[s][0];
    }
  printf ("%lu\n", sum);
  return 0;
}
