/* dlopens the library named by argv[1] before allocating anything, then
   prints how many threads the process had when the library's constructor
   ran (see loader_thread_lib.c). */
#include <dlfcn.h>
#include <stdio.h>

int
main (int argc, char **argv)
{
  if (argc < 2)
    return 2;
  void *h = dlopen (argv[1], RTLD_NOW);
  if (!h)
    return 3;
  int *t = dlsym (h, "threads_at_init");
  if (!t)
    return 4;
  printf ("threads when the library's constructor ran: %d\n", *t);
  return 0;
}
