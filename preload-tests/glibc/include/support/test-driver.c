/* Stand-in for glibc's <support/test-driver.c>: included at the end of a
   test, it defines main from the macros the test set (TEST_FUNCTION or
   TEST_FUNCTION_ARGV or do_test, PREPARE, CLEANUP_HANDLER, TIMEOUT,
   EXPECTED_SIGNAL, EXPECTED_STATUS, TEST_NO_MALLOPT, TEST_NO_SETVBUF). */
#include <support/test-driver.h>

int
main (int argc, char **argv)
{
  struct test_config c = { 0 };
#ifdef PREPARE
  c.prepare_function = (PREPARE);
#endif
#if defined (TEST_FUNCTION)
  c.test_function = TEST_FUNCTION;
#elif defined (TEST_FUNCTION_ARGV)
  c.test_function_argv = TEST_FUNCTION_ARGV;
#else
  c.test_function = do_test;
#endif
#ifdef CLEANUP_HANDLER
  c.cleanup_function = CLEANUP_HANDLER;
#endif
#ifdef EXPECTED_SIGNAL
  c.expected_signal = (EXPECTED_SIGNAL);
#endif
#ifdef EXPECTED_STATUS
  c.expected_status = (EXPECTED_STATUS);
#endif
#ifdef TEST_NO_MALLOPT
  c.no_mallopt = 1;
#endif
#ifdef TEST_NO_SETVBUF
  c.no_setvbuf = 1;
#endif
#ifdef TIMEOUT
  c.timeout = TIMEOUT;
#endif
  return support_test_main (argc, argv, &c);
}
