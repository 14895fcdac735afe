/* Keeps heaplive's thread busy: periodic dumps (the runner sets
   HEAPLIVE_DUMP_EVERY), dump signals, and leak warnings for a stack that
   keeps growing (a low HEAPLIVE_WARN_BYTES), while the main thread
   allocates and frees; runs at least 0.6 s and until 6 dumps are in
   the working directory (at most 30 s). Used with glibc_spy.c (issue #18). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

/* A dump signal from another process (a child): one the program sent
   itself would be its own, not a dump request (issue 32).  */
static void
signal_from_outside (int sig)
{
  pid_t me = getpid ();
  pid_t c = fork ();
  if (c == 0)
    {
      kill (me, sig);
      _exit (0);
    }
  if (c > 0)
    waitpid (c, NULL, 0);
}

enum { SLOTS = 256 };

/* Dumps in the working directory: heaplive.*.folded files, not the
   views written beside them (.samples.folded, .peak.folded...). */
static int
dumps_written (void)
{
  DIR *d = opendir (".");
  if (d == NULL)
    return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir (d)) != NULL)
    {
      size_t len = strlen (e->d_name);
      if (strncmp (e->d_name, "heaplive.", 9) == 0 && len > 7
          && strcmp (e->d_name + len - 7, ".folded") == 0
          && strstr (e->d_name, ".samples.") == NULL
          && strstr (e->d_name, ".peak.") == NULL
          && strstr (e->d_name, ".alloc.") == NULL)
        n++;
    }
  closedir (d);
  return n;
}

static __attribute__ ((noinline)) void *
grow (size_t n)
{
  return malloc (n);
}

int
main (void)
{
  static void *slot[SLOTS];
  static void *kept[4096];
  int nkept = 0;
  struct timespec start, now;
  clock_gettime (CLOCK_MONOTONIC, &start);
  unsigned int seed = 7;
  for (int round = 0;; round++)
    {
      for (int i = 0; i < 1000; i++)
        {
          int s = rand_r (&seed) % SLOTS;
          free (slot[s]);
          slot[s] = malloc (1 + rand_r (&seed) % 5000);
          memset (slot[s], 1, 1);
        }
      if (nkept < 4096)
        {
          kept[nkept] = grow (4096);
          memset (kept[nkept], round, 4096);
          nkept++;
        }
      if (round % 50 == 0)
        signal_from_outside (SIGUSR2);
      clock_gettime (CLOCK_MONOTONIC, &now);
      long ms = (now.tv_sec - start.tv_sec) * 1000
                + (now.tv_nsec - start.tv_nsec) / 1000000;
      if ((ms > 600 && dumps_written () >= 6) || ms > 30000)
        break;
      struct timespec pause = { 0, 2000000 };
      nanosleep (&pause, NULL);
    }
  for (int i = 0; i < SLOTS; i++)
    free (slot[i]);
  unsigned long sum = 0;
  for (int i = 0; i < nkept; i++)
    {
      sum += ((unsigned char *) kept[i])[4095];
      free (kept[i]);
    }
  printf ("grew: %s\n", nkept > 1 && sum > 0 ? "yes" : "no");
  return 0;
}
