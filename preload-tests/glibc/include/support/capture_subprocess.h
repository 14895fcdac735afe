/* Stand-in for glibc's <support/capture_subprocess.h>: see support.h. */
#ifndef HEAPLIVE_SUPPORT_CAPTURE_SUBPROCESS_H
#define HEAPLIVE_SUPPORT_CAPTURE_SUBPROCESS_H
#include <stddef.h>

struct xmemstream
{
  char *buffer;   /* NUL-terminated */
  size_t length;
};

struct support_capture_subprocess
{
  struct xmemstream out;
  struct xmemstream err;
  int status;     /* as from waitpid */
};

/* Runs callback(closure) in a fork child, collecting what it writes to
   stdout and stderr. */
struct support_capture_subprocess
support_capture_subprocess (void (*callback) (void *), void *closure);
void support_capture_subprocess_free (struct support_capture_subprocess *);
#endif
