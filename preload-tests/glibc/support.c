/* heaplive's stand-in for glibc's support/ library (libsupport): the part
   of its interface that glibc's malloc tests use, written for heaplive's
   test suite. Compiled into every test with -I include. See README.md. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <support/capture_subprocess.h>
#include <support/support.h>
#include <support/temp_file.h>
#include <support/test-driver.h>
#include <support/xsignal.h>
#include <support/xthread.h>
#include <support/xunistd.h>

unsigned int test_verbose;
const char *test_dir = "/tmp";

/* Failure count, shared between the monitoring parent and the test. */
static volatile unsigned int *failures;

void
support_record_failure (void)
{
  if (failures == NULL)
    {
      fputs ("error: failure recorded before the test started\n", stdout);
      exit (1);
    }
  __atomic_add_fetch (failures, 1, __ATOMIC_RELAXED);
}

void
support_fail (int status, const char *file, int line, const char *fmt, ...)
{
  int saved = errno;
  fflush (stdout);
  printf ("%s:%d: %s: ", file, line, status == 77 ? "warning" : "error");
  va_list ap;
  va_start (ap, fmt);
  errno = saved; /* for %m */
  vprintf (fmt, ap);
  va_end (ap);
  putchar ('\n');
  fflush (stdout);
  if (status != 77)
    support_record_failure ();
  if (status != 0)
    exit (status);
}

static void *
check_alloc (void *p, const char *what, size_t n)
{
  if (p == NULL && n != 0)
    support_fail (1, __FILE__, __LINE__, "%s of %zu bytes failed: %m", what, n);
  return p;
}

void *xmalloc (size_t n) { return check_alloc (malloc (n), "malloc", n); }
void *xcalloc (size_t a, size_t b) { return check_alloc (calloc (a, b), "calloc", a * b); }
void *xrealloc (void *p, size_t n) { return check_alloc (realloc (p, n), "realloc", n); }
char *xstrdup (const char *s) { return check_alloc (strdup (s), "strdup", 1); }

char *
xasprintf (const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char *s;
  int r = vasprintf (&s, fmt, ap);
  va_end (ap);
  if (r < 0)
    support_fail (1, __FILE__, __LINE__, "asprintf: %m");
  return s;
}

void
write_message (const char *s)
{
  size_t n = strlen (s);
  while (n > 0)
    {
      ssize_t w = write (STDOUT_FILENO, s, n);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        return;
      s += w;
      n -= w;
    }
}

void
ignore_stderr (void)
{
  int fd = open ("/dev/null", O_WRONLY);
  if (fd >= 0)
    {
      dup2 (fd, STDERR_FILENO);
      close (fd);
    }
}

/* A shared block keeps its length in front of it, for munmap. */
void *
support_shared_allocate (size_t n)
{
  size_t total = n + 64;
  char *p = mmap (NULL, total, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    support_fail (1, __FILE__, __LINE__, "shared mmap of %zu bytes: %m", n);
  *(size_t *) p = total;
  return p + 64;
}

void
support_shared_free (void *q)
{
  char *p = (char *) q - 64;
  munmap (p, *(size_t *) p);
}

#define XPTHREAD(call)                                                  \
  do {                                                                  \
    int _r = (call);                                                    \
    if (_r != 0)                                                        \
      {                                                                 \
        errno = _r;                                                     \
        support_fail (1, __FILE__, __LINE__, "%s: %m", #call);         \
      }                                                                 \
  } while (0)

pthread_t
xpthread_create (pthread_attr_t *attr, void *(*fn) (void *), void *arg)
{
  pthread_t t;
  XPTHREAD (pthread_create (&t, attr, fn, arg));
  return t;
}

void *
xpthread_join (pthread_t t)
{
  void *r;
  XPTHREAD (pthread_join (t, &r));
  return r;
}

void xpthread_kill (pthread_t t, int sig) { XPTHREAD (pthread_kill (t, sig)); }
void
xpthread_barrier_init (pthread_barrier_t *b, pthread_barrierattr_t *a,
                       unsigned int n)
{
  XPTHREAD (pthread_barrier_init (b, a, n));
}
void xpthread_barrier_destroy (pthread_barrier_t *b) { XPTHREAD (pthread_barrier_destroy (b)); }
void xpthread_barrierattr_init (pthread_barrierattr_t *a) { XPTHREAD (pthread_barrierattr_init (a)); }
void xpthread_barrierattr_setpshared (pthread_barrierattr_t *a, int s) { XPTHREAD (pthread_barrierattr_setpshared (a, s)); }
void xpthread_barrierattr_destroy (pthread_barrierattr_t *a) { XPTHREAD (pthread_barrierattr_destroy (a)); }

int
xpthread_barrier_wait (pthread_barrier_t *b)
{
  int r = pthread_barrier_wait (b);
  if (r == PTHREAD_BARRIER_SERIAL_THREAD)
    return 1;
  XPTHREAD (r);
  return 0;
}

pid_t
xfork (void)
{
  pid_t p = fork ();
  if (p < 0)
    support_fail (1, __FILE__, __LINE__, "fork: %m");
  return p;
}

long
xsysconf (int name)
{
  errno = 0;
  long r = sysconf (name);
  if (r < 0 && errno != 0)
    support_fail (1, __FILE__, __LINE__, "sysconf (%d): %m", name);
  return r;
}

int
xopen (const char *path, int flags, mode_t mode)
{
  int fd = open (path, flags, mode);
  if (fd < 0)
    support_fail (1, __FILE__, __LINE__, "open %s: %m", path);
  return fd;
}

void
xclose (int fd)
{
  if (close (fd) != 0 && errno != EINTR)
    support_fail (1, __FILE__, __LINE__, "close %d: %m", fd);
}

void *
xmmap (void *addr, size_t len, int prot, int flags, int fd)
{
  void *p = mmap (addr, len, prot, flags, fd, 0);
  if (p == MAP_FAILED)
    support_fail (1, __FILE__, __LINE__, "mmap of %zu bytes: %m", len);
  return p;
}

void
xmunmap (void *p, size_t len)
{
  if (munmap (p, len) != 0)
    support_fail (1, __FILE__, __LINE__, "munmap: %m");
}

sighandler_t
xsignal (int sig, sighandler_t h)
{
  sighandler_t old = signal (sig, h);
  if (old == SIG_ERR)
    support_fail (1, __FILE__, __LINE__, "signal %d: %m", sig);
  return old;
}

/* Temporary files, removed at exit by the process that made them. */
static char *temp_names[16];
static pid_t temp_owner[16];
static int temp_count;

static void
remove_temp_files (void)
{
  for (int i = 0; i < temp_count; i++)
    if (temp_owner[i] == getpid ())
      unlink (temp_names[i]);
}

int
create_temp_file (const char *base, char **name)
{
  if (temp_count == (int) (sizeof temp_names / sizeof temp_names[0]))
    support_fail (1, __FILE__, __LINE__, "too many temporary files");
  char *path = xasprintf ("%s/%sXXXXXX", test_dir, base);
  int fd = mkstemp (path);
  if (fd < 0)
    {
      printf ("cannot create temporary file %s: %m\n", path);
      free (path);
      return -1;
    }
  if (temp_count == 0)
    atexit (remove_temp_files);
  temp_names[temp_count] = path;
  temp_owner[temp_count] = getpid ();
  temp_count++;
  if (name != NULL)
    *name = path;
  return fd;
}

/* Appends what is readable on fd to s; returns 0 at end of file. */
static int
drain (int fd, struct xmemstream *s)
{
  char buf[4096];
  ssize_t n = read (fd, buf, sizeof buf);
  if (n < 0 && errno == EINTR)
    return 1;
  if (n <= 0)
    return 0;
  s->buffer = xrealloc (s->buffer, s->length + n + 1);
  memcpy (s->buffer + s->length, buf, n);
  s->length += n;
  s->buffer[s->length] = '\0';
  return 1;
}

struct support_capture_subprocess
support_capture_subprocess (void (*callback) (void *), void *closure)
{
  struct support_capture_subprocess r = { { xstrdup (""), 0 },
                                          { xstrdup (""), 0 }, 0 };
  int out[2], err[2];
  if (pipe (out) != 0 || pipe (err) != 0)
    support_fail (1, __FILE__, __LINE__, "pipe: %m");
  fflush (NULL);
  pid_t pid = xfork ();
  if (pid == 0)
    {
      dup2 (out[1], STDOUT_FILENO);
      dup2 (err[1], STDERR_FILENO);
      close (out[0]); close (out[1]); close (err[0]); close (err[1]);
      callback (closure);
      fflush (NULL);
      _exit (0);
    }
  close (out[1]);
  close (err[1]);
  struct pollfd p[2] = { { out[0], POLLIN, 0 }, { err[0], POLLIN, 0 } };
  int open_fds = 2;
  while (open_fds > 0)
    {
      if (poll (p, 2, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          support_fail (1, __FILE__, __LINE__, "poll: %m");
        }
      for (int i = 0; i < 2; i++)
        if (p[i].fd >= 0 && p[i].revents != 0
            && !drain (p[i].fd, i == 0 ? &r.out : &r.err))
          {
            close (p[i].fd);
            p[i].fd = -1;
            open_fds--;
          }
    }
  if (waitpid (pid, &r.status, 0) != pid)
    support_fail (1, __FILE__, __LINE__, "waitpid: %m");
  return r;
}

void
support_capture_subprocess_free (struct support_capture_subprocess *r)
{
  free (r->out.buffer);
  free (r->err.buffer);
}

/* The driver: runs the test in a child (unless --direct or TEST_DIRECT),
   kills it after TIMEOUT seconds (times TIMEOUTFACTOR), and turns its end
   into 0 (pass), 77 (unsupported) or 1 (fail). */
static pid_t test_pid;

static void
on_timeout (int sig)
{
  (void) sig;
  kill (-test_pid, SIGKILL);
  kill (test_pid, SIGKILL);
  int st;
  waitpid (test_pid, &st, 0);
  printf ("Timed out: killed the test process\n");
  fflush (stdout);
  _exit (1);
}

static int
final_status (int status)
{
  unsigned int n = __atomic_load_n (failures, __ATOMIC_RELAXED);
  if (n > 0)
    {
      printf ("error: %u test failures\n", n);
      return 1;
    }
  return status;
}

static int
run_test (int argc, char **argv, const struct test_config *c)
{
  int r = c->test_function_argv != NULL
            ? c->test_function_argv (argc, argv)
            : c->test_function ();
  if (c->cleanup_function != NULL)
    c->cleanup_function ();
  return r;
}

int
support_test_main (int argc, char **argv, const struct test_config *c)
{
  int direct = getenv ("TEST_DIRECT") != NULL;
  int shift = 1;
  for (; shift < argc && argv[shift][0] == '-'; shift++)
    if (strcmp (argv[shift], "--direct") == 0)
      direct = 1;
    else if (strcmp (argv[shift], "-v") == 0
             || strcmp (argv[shift], "--verbose") == 0)
      test_verbose++;
  argv[shift - 1] = argv[0];
  argc -= shift - 1;
  argv += shift - 1;

  const char *t = getenv ("TMPDIR");
  if (t != NULL && t[0] != '\0')
    test_dir = t;
  failures = support_shared_allocate (sizeof *failures);
  if (!c->no_mallopt)
    mallopt (M_PERTURB, 42);
  if (!c->no_setvbuf)
    setvbuf (stdout, NULL, _IONBF, 0);
  if (c->prepare_function != NULL)
    c->prepare_function (argc, argv);

  if (direct)
    return final_status (run_test (argc, argv, c));

  unsigned int timeout = c->timeout > 0 ? c->timeout : DEFAULT_TIMEOUT;
  const char *f = getenv ("TIMEOUTFACTOR");
  if (f != NULL && atoi (f) > 0)
    timeout *= atoi (f);
  /* heaplive's runner caps the long timeouts of a few stress tests, so a
     hang fails in seconds rather than minutes. */
  const char *max = getenv ("SUPPORT_TIMEOUT_MAX");
  if (max != NULL && atoi (max) > 0 && timeout > (unsigned int) atoi (max))
    timeout = atoi (max);

  fflush (stdout);
  test_pid = fork ();
  if (test_pid < 0)
    {
      printf ("cannot fork the test: %m\n");
      return 1;
    }
  if (test_pid == 0)
    {
      struct rlimit no_core = { 0, 0 };
      setrlimit (RLIMIT_CORE, &no_core);
      setpgid (0, 0);
      exit (run_test (argc, argv, c));
    }
  signal (SIGALRM, on_timeout);
  alarm (timeout);
  int st;
  while (waitpid (test_pid, &st, 0) != test_pid)
    if (errno != EINTR)
      {
        printf ("waitpid: %m\n");
        return 1;
      }
  alarm (0);
  if (WIFEXITED (st))
    {
      if (c->expected_signal != 0)
        {
          printf ("expected signal %s, the test exited with %d\n",
                  strsignal (c->expected_signal), WEXITSTATUS (st));
          return 1;
        }
      if (WEXITSTATUS (st) != c->expected_status)
        {
          if (WEXITSTATUS (st) == 77)
            return final_status (77);
          printf ("expected exit status %d, got %d\n", c->expected_status,
                  WEXITSTATUS (st));
          return 1;
        }
      return final_status (0);
    }
  if (WIFSIGNALED (st) && WTERMSIG (st) == c->expected_signal)
    return final_status (0);
  printf ("the test ended by signal %s\n",
          WIFSIGNALED (st) ? strsignal (WTERMSIG (st)) : "?");
  return 1;
}
