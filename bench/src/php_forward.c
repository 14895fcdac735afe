/* php_forward.c: the floor of PHP mode's cost (issue 26): a preload library
 * that registers an internal module, as heaplive does, whose RINIT installs
 * ZendMM custom handlers that only forward (and RSHUTDOWN removes them).
 * What any custom handler costs before it does anything of its own: PHP's
 * flag test and indirect call, and the cheapest call back into ZendMM.
 * PHP 7.4-8.4 NTS, x86-64. Not part of heaplive; used by hand:
 *
 *   gcc -O2 -shared -fPIC -o php_forward.so bench/src/php_forward.c
 *   FWD_MODE=bins LD_PRELOAD=$PWD/php_forward.so valgrind --tool=callgrind \
 *       --separate-threads=yes php8.2 -d opcache.enable_cli=1 bench/src/php_parser.php 40 2
 *
 * FWD_MODE: none = the module only, no handlers; generic (the default) = the flag cleared
 * around _zend_mm_alloc/_free/_realloc(heap, ...); bins =
 * emalloc through _emalloc_<bin> with the flag cleared (as heaplive), free
 * and realloc generic; count = bins plus a countdown in a static.
 * Figures: bench/history/2026-12-02-php26.md. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <stdbool.h>
typedef void *(*mm_malloc_t)(size_t); typedef void (*mm_free_t)(void*); typedef void *(*mm_realloc_t)(void*, size_t);
struct module_entry { unsigned short size; unsigned int zend_api; unsigned char zend_debug, zts;
  const void *ini_entry, *deps; const char *name; const void *functions;
  int (*mstartup)(int,int); int (*mshutdown)(int,int); int (*rstartup)(int,int); int (*rshutdown)(int,int);
  void (*info)(void*); const char *version; size_t globals_size; void *globals_ptr;
  void (*gctor)(void*); void (*gdtor)(void*); int (*post_deactivate)(void);
  int module_started; unsigned char type; void *handle; int module_number; const char *build_id; };
static int (**p_reg_func)(void); static int (*orig_reg)(void);
static struct module_entry *(*f_register_internal_module)(struct module_entry*);
static void *(*f_get_heap)(void); static bool (*f_is_zend_mm)(void);
static void (*f_set_handlers)(void*, mm_malloc_t, mm_free_t, mm_realloc_t);
static void *(*f_mm_alloc)(void*, size_t); static void (*f_mm_free)(void*, void*); static void *(*f_mm_realloc)(void*, void*, size_t);
static void *heap; static int mode;
static void *(*bins[3072/8+1])(void); static unsigned short binsz[3072/8+1];
static long countdown = 1L<<40;
static void *g_malloc(size_t sz) { *(int*)heap = 0; void *p = f_mm_alloc(heap, sz); *(int*)heap = 1; return p; }
static void g_free(void *p) { f_mm_free(heap, p); }
static void *g_realloc(void *p, size_t sz) { *(int*)heap = 0; void *q = f_mm_realloc(heap, p, sz); *(int*)heap = 1; return q; }
static void *b_malloc(size_t sz) {
  if (sz <= 3072) { void *(*f)(void) = bins[(sz+7)>>3]; *(int*)heap = 0; void *p = f(); *(int*)heap = 1; return p; }
  return g_malloc(sz); }
static void *c_malloc(size_t sz) {
  if (__builtin_expect(sz <= 3072, 1)) { size_t i = (sz+7)>>3; long l = countdown - binsz[i];
    if (__builtin_expect(l >= 0, 1)) { countdown = l; void *(*f)(void) = bins[i]; *(int*)heap = 0; void *p = f(); *(int*)heap = 1; return p; } countdown = 1L<<40; }
  return g_malloc(sz); }
static int r_startup(int t, int n) { heap = f_get_heap(); if (mode && f_is_zend_mm()) f_set_handlers(heap, mode==1?g_malloc:mode==2?b_malloc:c_malloc, g_free, g_realloc); return 0; }
static int r_shutdown(int t, int n) { if (mode && heap && !f_is_zend_mm()) f_set_handlers(heap, NULL, NULL, NULL); return 0; }
static struct module_entry hl_module = { .size = sizeof(struct module_entry), .name = "fwd", .version = "0",
  .rstartup = r_startup, .rshutdown = r_shutdown, .build_id = "API20220829,NTS" };
static int hl_register(void) { int rc = orig_reg(); hl_module.zend_api = 20220829; f_register_internal_module(&hl_module); return rc; }
__attribute__((constructor)) static void init(void) {
  const char *m = getenv("FWD_MODE"); mode = !m ? 1 : !strcmp(m,"none") ? 0 : !strcmp(m,"bins") ? 2 : !strcmp(m,"count") ? 3 : 1;
  p_reg_func = dlsym(RTLD_DEFAULT, "php_register_internal_extensions_func");
  f_register_internal_module = dlsym(RTLD_DEFAULT, "zend_register_internal_module");
  f_get_heap = dlsym(RTLD_DEFAULT, "zend_mm_get_heap"); f_is_zend_mm = dlsym(RTLD_DEFAULT, "is_zend_mm");
  f_set_handlers = dlsym(RTLD_DEFAULT, "zend_mm_set_custom_handlers");
  f_mm_alloc = dlsym(RTLD_DEFAULT, "_zend_mm_alloc"); f_mm_free = dlsym(RTLD_DEFAULT, "_zend_mm_free"); f_mm_realloc = dlsym(RTLD_DEFAULT, "_zend_mm_realloc");
  if (!dlsym(RTLD_DEFAULT, "executor_globals")) return;
  static const int sizes[] = {8,16,24,32,40,48,56,64,80,96,112,128,160,192,224,256,320,384,448,512,640,768,896,1024,1280,1536,1792,2048,2560,3072};
  int b = 0; char name[32];
  for (int i = 0; i <= 3072/8; i++) { int s = i*8; if (s < 8) s = 8; while (sizes[b] < s) b++;
    snprintf(name, sizeof name, "_emalloc_%d", sizes[b]); bins[i] = dlsym(RTLD_DEFAULT, name); binsz[i] = sizes[b]; if (!bins[i]) abort(); }
  if (!p_reg_func || !f_register_internal_module) return;
  orig_reg = *p_reg_func; *p_reg_func = hl_register;
}
