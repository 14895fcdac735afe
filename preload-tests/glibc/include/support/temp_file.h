/* Stand-in for glibc's <support/temp_file.h>: see support.h. */
#ifndef HEAPLIVE_SUPPORT_TEMP_FILE_H
#define HEAPLIVE_SUPPORT_TEMP_FILE_H
/* Creates a file named after `base` in $TMPDIR (or /tmp), removed when
   the test ends; returns its descriptor, and its name in *name when name
   is not NULL (owned by the stand-in). */
int create_temp_file (const char *base, char **name);
#endif
