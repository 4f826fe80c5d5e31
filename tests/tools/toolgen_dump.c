/* Drives toolgen for tests/integration/test_toolgen.py:
 *   toolgen_dump DIR                 reads {"server": name, "tools": [...]} on stdin, writes the
 *                                    runtime and mcptools/<server>/ under DIR, prints
 *                                    {"modules": [...], "skipped": [...]} on stdout
 *   toolgen_dump DIR --remove NAME   removes mcptools/NAME/ under DIR
 * Exit status 0, or 1 with a sentence on stderr. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "error.h"
#include "toolgen.h"

int main(int argc, char **argv) {
    if (argc != 2 && !(argc == 4 && !strcmp(argv[2], "--remove"))) {
        fprintf(stderr, "usage: %s DIR [--remove SERVER] (the tools on stdin)\n", argv[0]);
        return 2;
    }
    cleanup_close int dirfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        fprintf(stderr, "toolgen_dump: cannot open %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    if (argc == 4) {
        int r = ipb_toolgen_remove(dirfd, argv[3]);
        if (r < 0) {
            fprintf(stderr, "toolgen_dump: cannot remove %s: %s\n", argv[3], strerror(-r));
            return 1;
        }
        return 0;
    }
    json_error_t jerr;
    json_t *in = json_loadf(stdin, JSON_ALLOW_NUL, &jerr); /* NULs reach the generator */
    if (!in) {
        fprintf(stderr, "toolgen_dump: stdin is not JSON: %s\n", jerr.text);
        return 1;
    }
    const char *server = json_string_value(json_object_get(in, "server"));
    cleanup_error ipb_error *err = NULL;
    ipb_toolgen_pkg pkg;
    int rc = 1;
    if (ipb_toolgen_build(server ? server : "", json_object_get(in, "tools"), &pkg, &err) < 0) {
        fprintf(stderr, "toolgen_dump: %s\n", ipb_error_msg(err));
        json_decref(in);
        return 1;
    }
    if (ipb_toolgen_write_runtime(dirfd, &err) == 0 && ipb_toolgen_write(dirfd, server, &pkg, &err) == 0) {
        json_t *out = json_pack("{s:O,s:O}", "modules", pkg.modules, "skipped", pkg.skipped);
        if (out && json_dumpf(out, stdout, JSON_COMPACT | JSON_ENSURE_ASCII) == 0) {
            putchar('\n');
            rc = 0;
        }
        json_decref(out);
    } else {
        fprintf(stderr, "toolgen_dump: %s\n", ipb_error_msg(err));
    }
    ipb_toolgen_pkg_free(&pkg);
    json_decref(in);
    return rc;
}
