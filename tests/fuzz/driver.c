/* A main() for the libFuzzer harnesses tests/fuzz/fuzz_*.c without libFuzzer, so that `make
 * check` builds every harness with the project's compiler and flags and runs it over its
 * committed inputs, as `fuzz_X -runs=0 DIR...` would: LLVMFuzzerInitialize (when the harness
 * has one), then the empty input, then each file named on the command line (a directory stands
 * for the regular files in it, in name order), each once, in an exact-size heap buffer so that
 * a sanitizer sees any read past its end. An invariant that fails aborts, a sanitizer report
 * ends the process: either way the exit status is not 0, and the last "input:" line on stderr
 * names the file. No mutation, no corpus written: tests/fuzz/run does the fuzzing (clang).
 *
 *   fuzz_X [-q] FILE|DIR...      -q: no "input:" lines, only the summary
 *
 * Exit status: 0 when every input ran; 2 when a file or directory cannot be read or there is
 * no input file at all (a harness run on nothing proves nothing).
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional in a harness: weak, so that a harness without one links. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static bool quiet;
static const char *prog = "fuzz driver";

static int run_one(const char *path, const uint8_t *data, size_t size) {
    if (!quiet)
        fprintf(stderr, "input: %s (%zu bytes)\n", path, size);
    /* A copy of exactly size bytes: a harness may not keep or write the buffer, and a read
     * past it must land outside the allocation. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) {
        fprintf(stderr, "%s: out of memory for %s (%zu bytes)\n", prog, path, size);
        return -1;
    }
    if (size)
        memcpy(copy, data, size);
    (void)LLVMFuzzerTestOneInput(copy, size);
    free(copy);
    return 0;
}

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open %s: %s\n", prog, path, strerror(errno));
        return -1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 4096;
            uint8_t *n = realloc(buf, ncap);
            if (!n) {
                fprintf(stderr, "%s: out of memory reading %s\n", prog, path);
                free(buf);
                fclose(f);
                return -1;
            }
            buf = n;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: cannot read %s\n", prog, path);
        free(buf);
        return -1;
    }
    int r = run_one(path, buf, len);
    free(buf);
    return r;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Runs the regular files in dir (not recursively; dot files are skipped), in name order;
 * *count gets the number run. */
static int run_dir(const char *dir, int *count) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: cannot open directory %s: %s\n", prog, dir, strerror(errno));
        return -1;
    }
    char **paths = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char *p;
        if (asprintf(&p, "%s/%s", dir, e->d_name) < 0) {
            r = -1;
            break;
        }
        struct stat st;
        if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
            free(p);
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            char **np = realloc(paths, cap * sizeof *np);
            if (!np) {
                free(p);
                r = -1;
                break;
            }
            paths = np;
        }
        paths[n++] = p;
    }
    closedir(d);
    if (r < 0)
        fprintf(stderr, "%s: out of memory listing %s\n", prog, dir);
    if (n)
        qsort(paths, n, sizeof *paths, by_name);
    for (size_t i = 0; i < n; i++) {
        if (r == 0 && run_file(paths[i]) < 0)
            r = -1;
        else if (r == 0)
            (*count)++;
        free(paths[i]);
    }
    free(paths);
    return r;
}

int main(int argc, char **argv) {
    const char *slash = strrchr(argv[0], '/');
    prog = slash ? slash + 1 : argv[0];
    int first = 1;
    if (argc > 1 && strcmp(argv[1], "-q") == 0) {
        quiet = true;
        first = 2;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: %s [-q] FILE|DIR...   (runs each input once, as libFuzzer -runs=0)\n", prog);
        return 2;
    }
    if (LLVMFuzzerInitialize)
        (void)LLVMFuzzerInitialize(&argc, &argv);
    /* libFuzzer tries the empty input first, whatever the corpus. */
    uint8_t none = 0;
    if (run_one("(empty input)", &none, 0) < 0)
        return 2;
    int count = 0;
    for (int i = first; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: %s: %s\n", prog, argv[i], strerror(errno));
            return 2;
        }
        if (S_ISDIR(st.st_mode)) {
            if (run_dir(argv[i], &count) < 0)
                return 2;
        } else {
            if (run_file(argv[i]) < 0)
                return 2;
            count++;
        }
    }
    if (count == 0) {
        fprintf(stderr, "%s: no input files in", prog);
        for (int i = first; i < argc; i++)
            fprintf(stderr, " %s", argv[i]);
        fprintf(stderr, " (a harness run on nothing proves nothing)\n");
        return 2;
    }
    printf("%s: %d inputs and the empty one ran\n", prog, count);
    return 0;
}
