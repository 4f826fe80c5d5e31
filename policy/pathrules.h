/* Path rules for /app-relative paths and host paths inside allowed directories. Pure string
 * checks; the file layer re-checks at open time with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define IPB_RELPATH_MAX 4096

/* A path below /app: not empty, not absolute, no NUL, no ".." component, no empty result.
 * `len` is the byte length (JSON strings may carry embedded NULs). */
int ipb_check_relpath(const char *p, size_t len, ipb_error **err);
/* Whether canonical absolute `path` is `dir` or below it (both canonical, no trailing '/'
 * except for "/"). */
bool ipb_path_is_under(const char *path, const char *dir);
