/* fork() from a SIGALRM handler, 2,000 times, while the main thread
   allocates and frees (issue #18; the pattern of glibc's tst-mallocfork2).
   glibc's fork is async-signal-safe in a single-threaded process: the
   child _exits at once, the handler reaps it. Prints how many forks
   succeeded and failed; a hang is the failure the runner looks for. */
#include "glibc_fork_common.h"

enum { FORKS = 2000, SLOTS = 509 };

static volatile sig_atomic_t forks, failures;

static void
on_alarm (int sig)
{
  (void) sig;
  if (forks < FORKS)
    {
      fork_in_handler (&failures);
      forks++;
    }
}

int
main (void)
{
  alarm_every (on_alarm, 200);

  static void *slot[SLOTS];
  unsigned int seed = 1;
  unsigned long allocations = 0;
  while (forks < FORKS)
    {
      unsigned int i = rand_r (&seed) % SLOTS;
      free (slot[i]);
      slot[i] = malloc (1 + rand_r (&seed) % 40000);
      if (slot[i] == NULL)
        {
          puts ("malloc failed");
          return 1;
        }
      memset (slot[i], 0x5a, 16);
      allocations++;
    }
  alarm_stop ();
  for (int i = 0; i < SLOTS; i++)
    free (slot[i]);
  printf ("forks: %d\nfailed forks: %d\nallocated meanwhile: %s\n",
          (int) forks, (int) failures, allocations > 0 ? "yes" : "no");
  return failures != 0;
}
