/* What the glibc_fork_ programs share (issue #18): the headers, a fork
   whose child _exits at once and is reaped (from a handler too), and a
   SIGALRM handler called every few microseconds. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

/* Forks a child that _exits at once and reaps it: 0 when it exited with
   status 0, -1 otherwise. */
static int
fork_and_reap (void)
{
  pid_t pid = fork ();
  if (pid == 0)
    _exit (0);
  if (pid < 0)
    return -1;
  int st;
  pid_t r;
  do
    r = waitpid (pid, &st, 0);
  while (r < 0 && errno == EINTR);
  return r == pid && WIFEXITED (st) && WEXITSTATUS (st) == 0 ? 0 : -1;
}

/* fork_and_reap from a signal handler: counts a failure in *failures,
   keeps errno as it was. */
static void
fork_in_handler (volatile sig_atomic_t *failures)
{
  int saved = errno;
  if (fork_and_reap () != 0)
    (*failures)++;
  errno = saved;
}

/* Calls `handler` on SIGALRM (SA_RESTART) every `usec` microseconds. */
static void
alarm_every (void (*handler) (int), long usec)
{
  struct sigaction sa;
  memset (&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = SA_RESTART;
  sigaction (SIGALRM, &sa, NULL);
  struct itimerval it = { { 0, usec }, { 0, usec } };
  setitimer (ITIMER_REAL, &it, NULL);
}

/* Stops alarm_every's timer. */
static void
alarm_stop (void)
{
  struct itimerval off = { { 0, 0 }, { 0, 0 } };
  setitimer (ITIMER_REAL, &off, NULL);
}
