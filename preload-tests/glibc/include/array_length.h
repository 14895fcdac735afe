/* Stand-in for glibc's internal <array_length.h>. */
#ifndef HEAPLIVE_ARRAY_LENGTH_H
#define HEAPLIVE_ARRAY_LENGTH_H
#define array_length(a) (sizeof (a) / sizeof ((a)[0]))
#define array_end(a) (&(a)[array_length (a)])
#endif
