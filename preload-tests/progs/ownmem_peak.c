/* The peak RSS of a dump whose stacks run through libc (libc6-dbg: 9.6 MiB
 * of DWARF once decompressed, 2,000 compilation units). Takes blocks from
 * inside libc (regcomp, strdup, asprintf, open_memstream), resets the
 * process's peak RSS (/proc/self/clear_refs, 5), calls heaplive_dump()
 * (found with dlsym) and prints how far the peak rose above the RSS before
 * the dump, in KiB: "rise N". preload-tests/ownmem.rs bounds it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile keep[64];

static long status_kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n))
            v = atol(line + n);
    if (f)
        fclose(f);
    return v;
}

int main(void) {
    int (*dump)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "heaplive_dump");
    static regex_t re;
    regcomp(&re, "^(a|b)+[0-9]{2,5}x*$", REG_EXTENDED);
    int n = 0;
    keep[n++] = strdup("a string from strdup");
    char *s;
    if (asprintf(&s, "%d", 42) > 0)
        keep[n++] = s;
    char *buf;
    size_t len;
    FILE *f = open_memstream(&buf, &len);
    fprintf(f, "%0*d", 5000, 7);
    fclose(f);
    keep[n++] = buf;
    FILE *c = fopen("/proc/self/clear_refs", "w");
    if (!c || fputs("5", c) < 0 || fclose(c) != 0) {
        printf("cannot reset the peak RSS\n");
        return 1;
    }
    long before = status_kib("VmRSS:");
    if (!dump || dump(NULL) != 0) {
        printf("dump failed\n");
        return 1;
    }
    long peak = status_kib("VmHWM:");
    printf("rise %ld\n", peak - before);
    return 0;
}
