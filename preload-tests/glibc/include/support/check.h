/* Stand-in for glibc's <support/check.h>: see support.h. */
#ifndef HEAPLIVE_SUPPORT_CHECK_H
#define HEAPLIVE_SUPPORT_CHECK_H
#include <support/support.h>
#include <string.h>

#define FAIL(...) support_fail (0, __FILE__, __LINE__, __VA_ARGS__)
#define FAIL_EXIT(st, ...) support_fail (st, __FILE__, __LINE__, __VA_ARGS__)
#define FAIL_EXIT1(...) support_fail (1, __FILE__, __LINE__, __VA_ARGS__)
#define FAIL_RET(...) \
  do { support_fail (0, __FILE__, __LINE__, __VA_ARGS__); return 1; } while (0)
#define FAIL_UNSUPPORTED(...) \
  support_fail (77, __FILE__, __LINE__, "unsupported: " __VA_ARGS__)

#define TEST_VERIFY(e) \
  do { if (!(e)) FAIL ("not true: %s", #e); } while (0)
#define TEST_VERIFY_EXIT(e) \
  do { if (!(e)) FAIL_EXIT1 ("not true: %s", #e); } while (0)

/* Integer comparison; both sides widened to 128 bits so that signed and
   unsigned values compare as numbers. */
#define TEST_COMPARE(a, b)                                              \
  do {                                                                  \
    __int128 _l = (a), _r = (b);                                        \
    if (_l != _r)                                                       \
      FAIL ("%s == %s: %lld != %lld", #a, #b, (long long) _l,           \
            (long long) _r);                                            \
  } while (0)

#define TEST_COMPARE_BLOB(a, alen, b, blen)                             \
  do {                                                                  \
    size_t _al = (alen), _bl = (blen);                                  \
    if (_al != _bl || memcmp ((a), (b), _al) != 0)                      \
      FAIL ("blobs %s and %s differ", #a, #b);                          \
  } while (0)
#endif
