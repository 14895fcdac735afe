/* heaplive's stand-in for glibc's support/ library: only the interface
   that glibc's malloc tests (malloc/tst-*.c, fetched at test time) use.
   Written for heaplive; implementation in ../../support.c. */
#ifndef HEAPLIVE_SUPPORT_H
#define HEAPLIVE_SUPPORT_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Counts a failure that does not end the test (TEST_VERIFY, FAIL); kept
   in shared memory so the monitoring parent sees the test child's. */
void support_record_failure (void);
/* Prints "file:line: " and the message; records a failure; exits with
   status `status` unless it is 0. */
void support_fail (int status, const char *file, int line,
                   const char *fmt, ...)
  __attribute__ ((format (printf, 4, 5)));

void *xmalloc (size_t);
void *xcalloc (size_t, size_t);
void *xrealloc (void *, size_t);
char *xstrdup (const char *);
char *xasprintf (const char *, ...) __attribute__ ((format (printf, 1, 2)));

/* Writes the string to stdout with write(2) (async-signal-safe). */
void write_message (const char *);
/* Sends this process's stderr to /dev/null. */
void ignore_stderr (void);

/* Memory shared with fork children. */
void *support_shared_allocate (size_t);
void support_shared_free (void *);

#ifdef __cplusplus
}
#endif
#endif
