/* A program that never creates a thread, for HEAPLIVE_SIGNAL=none
   (preload-tests/glibc.rs): glibc's __libc_single_threaded must stay 1
   while heaplive samples, dumps on request and at exit, and turn 0 only
   when a leak warning is due (heaplive's thread writes it).

   Known live blocks at two call sites (kept to the exit dump):
     site_small: 3 blocks of 1000 bytes   = 3000 bytes
     site_odd:   5 blocks of 333 bytes    = 1665 bytes
   then heaplive_dump(argv[1]) (found with dlsym), then site_leak grows
   to 32 MiB in 64 KiB blocks (kept), which crosses HEAPLIVE_WARN_BYTES
   when the test sets it to 4M, then frees the second half of it (16 MiB
   of site_leak stay, and the exit comes after the peak). Prints the flag
   at each step and the heaplive_dump() result. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>

static void *small[3], *odd[5], *leak[512];

__attribute__ ((noinline)) static void *
site_small (void)
{
  return malloc (1000);
}

__attribute__ ((noinline)) static void *
site_odd (void)
{
  return malloc (333);
}

__attribute__ ((noinline)) static void *
site_leak (void)
{
  return malloc (64 * 1024);
}

int
main (int argc, char **argv)
{
  /* Churn that is freed: nothing of it is live at the dumps. */
  for (int i = 0; i < 2000; i++)
    {
      void *p = malloc (16 + i % 4000);
      memset (p, 2, 16);
      free (p);
    }
  for (int i = 0; i < 3; i++)
    memset (small[i] = site_small (), 1, 1000);
  for (int i = 0; i < 5; i++)
    memset (odd[i] = site_odd (), 1, 333);
  printf ("before the dump: __libc_single_threaded=%d\n",
          (int) __libc_single_threaded);
  int (*dump) (const char *)
      = (int (*) (const char *)) dlsym (RTLD_DEFAULT, "heaplive_dump");
  if (dump != NULL && argc > 1)
    printf ("heaplive_dump: %d\n", dump (argv[1]));
  else
    printf ("heaplive_dump: none\n");
  printf ("after the dump: __libc_single_threaded=%d\n",
          (int) __libc_single_threaded);
  for (int i = 0; i < 512; i++)
    memset (leak[i] = site_leak (), 3, 64);
  printf ("after 32 MiB at one site: __libc_single_threaded=%d\n",
          (int) __libc_single_threaded);
  /* The live total falls from its peak: heaplive's exit line names it. */
  for (int i = 256; i < 512; i++)
    free (leak[i]);
  fflush (stdout);
  return 0;
}
