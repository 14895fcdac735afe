/* fork() in a loop on the main thread while a SIGALRM handler forks too,
   every millisecond (issue #18): the handler's fork may interrupt the
   main thread's fork anywhere, also inside heaplive's atfork handlers
   while they release heaplive's locks. Children _exit at once; both
   reap theirs. Prints the main loop's forks and every failure; a hang is
   the failure the runner looks for. */
#include "glibc_fork_common.h"

enum { FORKS = 1500 };

static volatile sig_atomic_t in_handler, failures;

static void
on_alarm (int sig)
{
  (void) sig;
  fork_in_handler (&failures);
  in_handler++;
}

int
main (void)
{
  alarm_every (on_alarm, 1000);

  int main_failures = 0;
  for (int i = 0; i < FORKS; i++)
    {
      void *p = malloc (100 + i);
      if (fork_and_reap () != 0)
        main_failures++;
      free (p);
    }
  alarm_stop ();
  printf ("forks in the main loop: %d\nfailed: %d\nfailed in the handler: %d\n"
          "handler forked: %s\n",
          FORKS, main_failures, (int) failures, in_handler > 0 ? "yes" : "no");
  return main_failures != 0 || failures != 0;
}
