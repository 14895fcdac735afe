/* Stand-in for glibc's <support/test-driver.h>: the test's settings,
   filled from the macros a test defines by <support/test-driver.c>. */
#ifndef HEAPLIVE_SUPPORT_TEST_DRIVER_H
#define HEAPLIVE_SUPPORT_TEST_DRIVER_H

enum
{
  EXIT_UNSUPPORTED = 77,
  DEFAULT_TIMEOUT = 20,
};

struct test_config
{
  void (*prepare_function) (int, char **);
  int (*test_function) (void);
  int (*test_function_argv) (int, char **);
  void (*cleanup_function) (void);
  int timeout;          /* seconds; 0: DEFAULT_TIMEOUT */
  int expected_status;
  int expected_signal;  /* 0: the test must exit */
  char no_mallopt;      /* do not call mallopt (M_PERTURB) */
  char no_setvbuf;      /* leave stdout buffered */
};

extern unsigned int test_verbose;
extern const char *test_dir;
#define verbose_printf(...) \
  do { if (test_verbose) printf (__VA_ARGS__); } while (0)

int support_test_main (int argc, char **argv, const struct test_config *);
#endif
