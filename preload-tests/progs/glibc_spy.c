/* A second preload, placed after heaplive: heaplive's real malloc, free,
   calloc and realloc are these. Counts the calls made on heaplive's own
   thread (named "heaplive"), which must be none: a glibc allocation there
   takes a glibc arena lock, and while a fork from a signal handler has
   set __libc_single_threaded it runs without one (issue #18,
   tst-mallocfork2). At exit, one line on stderr with the counts, and the
   calls from the program's threads (to show the spy was in place). */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

extern void *__libc_malloc (size_t);
extern void *__libc_calloc (size_t, size_t);
extern void *__libc_realloc (void *, size_t);
extern void __libc_free (void *);

static atomic_ulong on_heaplive, elsewhere;

static void
count (void)
{
  char name[17] = { 0 };
  prctl (PR_GET_NAME, name);
  if (strcmp (name, "heaplive") == 0)
    atomic_fetch_add (&on_heaplive, 1);
  else
    atomic_fetch_add (&elsewhere, 1);
}

void *
malloc (size_t n)
{
  count ();
  return __libc_malloc (n);
}

void *
calloc (size_t a, size_t b)
{
  count ();
  return __libc_calloc (a, b);
}

void *
realloc (void *p, size_t n)
{
  count ();
  return __libc_realloc (p, n);
}

void
free (void *p)
{
  if (p != NULL)
    count ();
  __libc_free (p);
}

__attribute__ ((destructor)) static void
report (void)
{
  char line[160];
  int n = snprintf (line, sizeof line,
                    "spy: glibc allocation calls on heaplive's thread: %lu; "
                    "on the program's: %lu\n",
                    (unsigned long) atomic_load (&on_heaplive),
                    (unsigned long) atomic_load (&elsewhere));
  if (n > 0)
    write (2, line, (size_t) n);
}
