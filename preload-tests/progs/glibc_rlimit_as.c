/* Lowers RLIMIT_AS to 200 MiB after start, then allocates 100 MiB (and
   touches it) and starts 4 threads, printing what succeeded (issue #18:
   the limit is one the program lives with alone; a profiler that reserved
   address space up front leaves it none).

   The threads allocate only once all of them exist. glibc gives a
   thread's first malloc an arena of its own, reserving 64 MiB of address
   space when that fits under the limit: plain, that reservation made
   after the first thread's stack leaves exactly room for the other three
   stacks (103 + 8 + 64 + 24 = 199 MiB of 200), so any preload at all
   (heaplive's library alone maps 1.5 MiB) made pthread_create fail when
   a thread got to malloc before the main thread had made the others.
   Made after the four stacks, the reservation fits plain (199 MiB) and
   is refused under the preload (the thread then shares the main arena):
   the program's output is the same either way. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

enum { MIB = 1 << 20, BLOCKS = 100, THREADS = 4 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int go;

static void *
worker (void *arg)
{
  pthread_mutex_lock (&lock);
  while (!go)
    pthread_cond_wait (&cond, &lock);
  pthread_mutex_unlock (&lock);
  char *p = malloc (1000);
  if (p == NULL)
    return NULL;
  memset (p, 7, 1000);
  free (p);
  return arg;
}

int
main (void)
{
  struct rlimit rl = { 200 * (rlim_t) MIB, 200 * (rlim_t) MIB };
  if (setrlimit (RLIMIT_AS, &rl) != 0)
    {
      printf ("setrlimit: %s\n", strerror (errno));
      return 2;
    }
  puts ("RLIMIT_AS: 200 MiB");

  static char *block[BLOCKS];
  int got = 0;
  for (int i = 0; i < BLOCKS; i++)
    {
      block[i] = malloc (MIB);
      if (block[i] == NULL)
        break;
      memset (block[i], i, MIB);
      got++;
    }
  printf ("allocated and touched: %d MiB of %d\n", got, BLOCKS);

  pthread_t t[THREADS];
  static int token[THREADS];
  int started = 0, finished = 0;
  for (int i = 0; i < THREADS; i++)
    {
      int e = pthread_create (&t[started], NULL, worker, &token[i]);
      if (e != 0)
        {
          printf ("pthread_create %d: %s\n", i, strerror (e));
          continue;
        }
      started++;
    }
  pthread_mutex_lock (&lock);
  go = 1;
  pthread_cond_broadcast (&cond);
  pthread_mutex_unlock (&lock);
  for (int i = 0; i < started; i++)
    {
      void *r;
      if (pthread_join (t[i], &r) == 0 && r != NULL)
        finished++;
    }
  printf ("threads started: %d of %d, allocated in the thread: %d\n",
          started, THREADS, finished);
  for (int i = 0; i < got; i++)
    free (block[i]);
  return got == BLOCKS && finished == THREADS ? 0 : 1;
}
