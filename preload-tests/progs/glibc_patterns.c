/* What other heap profilers' test suites stress, in one program whose
   output must not change under the preload (issue #18): aligned
   allocation of every kind and alignment, realloc chains that keep their
   contents, malloc_usable_size, mallopt, malloc_trim, reallocarray and
   calloc overflow (NULL with ENOMEM), free(NULL) keeping errno, and
   threads freeing each other's blocks. Prints one line per check (no
   addresses, no timing); exits 1 if a check failed. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

static void
check (int ok, const char *what)
{
  printf ("%s: %s\n", ok ? "ok" : "FAILED", what);
  if (!ok)
    failures++;
}

/* Sizes the compiler cannot see through. */
static volatile size_t huge = SIZE_MAX / 2;

static int
filled (const unsigned char *p, size_t n, unsigned char c)
{
  for (size_t i = 0; i < n; i++)
    if (p[i] != c)
      return 0;
  return 1;
}

static void
aligned_kinds (void)
{
  static const size_t align[] = { 8, 16, 32, 64, 256, 4096, 65536 };
  static const size_t size[] = { 1, 24, 100, 4095, 4097, 200000 };
  void *keep[7 * 6 * 3];
  int n = 0, bad = 0;
  for (size_t a = 0; a < 7; a++)
    for (size_t s = 0; s < 6; s++)
      {
        void *p = NULL;
        if (posix_memalign (&p, align[a], size[s]) != 0)
          bad++;
        void *q = memalign (align[a], size[s]);
        void *r = aligned_alloc (align[a], (size[s] + align[a] - 1)
                                               / align[a] * align[a]);
        void *three[3] = { p, q, r };
        for (int k = 0; k < 3; k++)
          {
            unsigned char *b = three[k];
            if (b == NULL || (uintptr_t) b % align[a] != 0
                || malloc_usable_size (b) < size[s])
              bad++;
            else
              memset (b, 0x40 + k, size[s]);
            keep[n++] = b;
          }
      }
  for (int i = n - 1; i >= 0; i -= 2)
    free (keep[i]);
  for (int i = n - 2; i >= 0; i -= 2)
    free (keep[i]);
  char line[80];
  snprintf (line, sizeof line,
            "posix_memalign, memalign, aligned_alloc: %d blocks aligned", n);
  check (bad == 0, line);

  unsigned char *v = valloc (5000), *pv = pvalloc (5000);
  long page = sysconf (_SC_PAGESIZE);
  check (v && (uintptr_t) v % page == 0 && malloc_usable_size (v) >= 5000,
         "valloc: page aligned");
  check (pv && (uintptr_t) pv % page == 0
             && malloc_usable_size (pv) >= 2 * (size_t) page,
         "pvalloc: page aligned, rounded up to whole pages");
  free (v);
  free (pv);

  void *p = (void *) 1;
  check (posix_memalign (&p, 24, 100) == EINVAL && p == (void *) 1,
         "posix_memalign(24): EINVAL, pointer untouched");
  p = NULL;
  check (posix_memalign (&p, 64, huge) == ENOMEM && p == NULL,
         "posix_memalign of SIZE_MAX/2: ENOMEM");
  errno = 0;
  p = memalign (64, huge);
  check (p == NULL && errno == ENOMEM, "memalign of SIZE_MAX/2: NULL, ENOMEM");
}

static void
realloc_chains (void)
{
  unsigned char *p = malloc (1);
  p[0] = 0x11;
  size_t n = 1, ok = 1;
  /* Grow through the small, medium and mmap'd sizes, then shrink back. */
  for (int step = 0; step < 24; step++)
    {
      size_t m = n * 2 + 3;
      unsigned char *q = realloc (p, m);
      if (q == NULL || !filled (q, n, 0x11))
        ok = 0;
      memset (q + n, 0x11, m - n);
      p = q;
      n = m;
    }
  size_t biggest = n;
  while (n > 8)
    {
      n /= 3;
      p = realloc (p, n);
      if (p == NULL || !filled (p, n, 0x11))
        ok = 0;
    }
  char line[80];
  snprintf (line, sizeof line,
            "realloc chain 1 -> %zu -> %zu bytes keeps the contents", biggest,
            n);
  check (ok, line);
  size_t u = malloc_usable_size (p);
  check (u >= n, "malloc_usable_size >= the size asked");
  memset (p, 0x11, u);
  free (p);
  check (malloc_usable_size (NULL) == 0, "malloc_usable_size(NULL) = 0");

  errno = 0;
  p = malloc (10);
  void *q = realloc (p, huge);
  check (q == NULL && errno == ENOMEM, "realloc to SIZE_MAX/2: NULL, ENOMEM");
  free (q == NULL ? (void *) p : q);
  p = realloc (NULL, 77);
  check (p != NULL, "realloc(NULL, 77) allocates");
  free (p);
}

static void
overflow_and_errno (void)
{
  errno = 0;
  void *p = calloc (huge, 3);
  check (p == NULL && errno == ENOMEM, "calloc overflow: NULL, ENOMEM");
  errno = 0;
  p = reallocarray (NULL, huge, 5);
  check (p == NULL && errno == ENOMEM, "reallocarray overflow: NULL, ENOMEM");
  unsigned char *z = calloc (1000, 10);
  check (z && filled (z, 10000, 0), "calloc(1000, 10) is zeroed");
  memset (z, 0x5a, 10000);
  free (z);
  z = calloc (300, 1000);
  check (z && filled (z, 300000, 0), "calloc(300, 1000) is zeroed");
  free (z);
  z = reallocarray (NULL, 40, 25);
  check (z != NULL && malloc_usable_size (z) >= 1000, "reallocarray(NULL, 40, 25)");
  free (z);
  errno = 4321;
  free (NULL);
  check (errno == 4321, "free(NULL) keeps errno");
  errno = 4321;
  free (malloc (50));
  check (errno == 4321, "malloc and free keep errno");
}

static void
tuning (void)
{
  check (mallopt (M_MMAP_THRESHOLD, 64 * 1024) == 1, "mallopt(M_MMAP_THRESHOLD)");
  check (mallopt (M_TRIM_THRESHOLD, 128 * 1024) == 1, "mallopt(M_TRIM_THRESHOLD)");
  check (mallopt (M_TOP_PAD, 0) == 1, "mallopt(M_TOP_PAD)");
  check (mallopt (M_ARENA_MAX, 4) == 1, "mallopt(M_ARENA_MAX)");
  void *big[64];
  for (int i = 0; i < 64; i++)
    big[i] = malloc (60 * 1024);
  for (int i = 0; i < 64; i++)
    free (big[i]);
  malloc_trim (0);
  check (1, "malloc_trim(0) after freeing 64 blocks");
  struct mallinfo2 mi = mallinfo2 ();
  check (mi.arena >= mi.fordblks, "mallinfo2: arena >= free bytes");
}

/* Threads that free each other's blocks: each allocates into its own row
   of a shared table, and frees the row of the next thread. */
enum { THREADS = 4, ROW = 2000, ROUNDS = 8 };
static void *table[THREADS][ROW];
static pthread_barrier_t barrier;

static void *
worker (void *arg)
{
  int me = (int) (intptr_t) arg, next = (me + 1) % THREADS;
  unsigned long x = 0x9e3779b97f4a7c15UL * (me + 1);
  for (int round = 0; round < ROUNDS; round++)
    {
      for (int i = 0; i < ROW; i++)
        {
          x ^= x << 13;
          x ^= x >> 7;
          x ^= x << 17;
          size_t n = 1 + x % 3000;
          unsigned char *p;
          switch (x >> 60 & 3)
            {
            case 0: p = malloc (n); break;
            case 1: p = calloc (1, n); break;
            case 2: p = aligned_alloc (64, (n + 63) & ~(size_t) 63); break;
            default: p = realloc (NULL, n); break;
            }
          if (p == NULL)
            return (void *) 1;
          p[0] = (unsigned char) me;
          table[me][i] = p;
        }
      pthread_barrier_wait (&barrier);
      for (int i = 0; i < ROW; i++)
        {
          unsigned char *p = table[next][i];
          if (p[0] != next)
            return (void *) 1;
          free (p);
        }
      pthread_barrier_wait (&barrier);
    }
  return NULL;
}

static void
cross_thread_frees (void)
{
  pthread_t t[THREADS];
  pthread_barrier_init (&barrier, NULL, THREADS);
  int started = 0, bad = 0;
  for (int i = 0; i < THREADS; i++)
    if (pthread_create (&t[i], NULL, worker, (void *) (intptr_t) i) == 0)
      started++;
  for (int i = 0; i < started; i++)
    {
      void *r;
      if (pthread_join (t[i], &r) != 0 || r != NULL)
        bad++;
    }
  char line[96];
  snprintf (line, sizeof line,
            "%d threads freed %d of each other's blocks", started,
            THREADS * ROW * ROUNDS);
  check (started == THREADS && bad == 0, line);
}

int
main (void)
{
  aligned_kinds ();
  realloc_chains ();
  overflow_and_errno ();
  tuning ();
  cross_thread_frees ();
  printf ("%d failures\n", failures);
  return failures != 0;
}
