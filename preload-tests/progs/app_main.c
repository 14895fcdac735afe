/* The executable of preload-tests/top_app.rs: its functions call a shared
 * library's allocating function (app_lib.c); `heaplive top --app` must name
 * them, not the library's function. */
#include <stddef.h>

void *lib_buffer(size_t n);
void lib_start_worker(void);

__attribute__((noinline)) static void make_table(void) {
    for (int i = 0; i < 3; i++)
        lib_buffer(10000);
}

__attribute__((noinline)) static void make_index(void) { lib_buffer(7000); }

int main(void) {
    lib_start_worker();
    make_table();
    make_index();
    return 0;
}
