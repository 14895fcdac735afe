/* Stand-in for glibc's internal <libc-diag.h>: warning push/pop macros. */
#ifndef HEAPLIVE_LIBC_DIAG_H
#define HEAPLIVE_LIBC_DIAG_H
#define DIAG_PUSH_NEEDS_COMMENT _Pragma ("GCC diagnostic push")
#define DIAG_POP_NEEDS_COMMENT _Pragma ("GCC diagnostic pop")
#define DIAG_IGNORE_NEEDS_COMMENT(version, option) \
  _Pragma (DIAG_STR_ (GCC diagnostic ignored option))
#define DIAG_STR_(x) #x
#endif
