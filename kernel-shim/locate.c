#include "shim_proto.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ipb_find_libexec(const char *name, char **ret_path, ipb_error **err) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            /* From bin/ (ipybox), or from libexec/ipybox/ itself (ipybox-monitor). */
            size_t dl = strlen(exe), tl = strlen("/libexec/ipybox");
            bool inside = dl >= tl && !strcmp(exe + dl - tl, "/libexec/ipybox");
            char *p = NULL;
            if (asprintf(&p, inside ? "%s/%s" : "%s/../libexec/ipybox/%s", exe, name) >= 0) {
                if (access(p, X_OK) == 0) {
                    *ret_path = p;
                    return 0;
                }
                free(p);
            }
        }
    }
    char installed[PATH_MAX];
    snprintf(installed, sizeof(installed), "%s/ipybox/%s", IPYBOX_LIBEXECDIR, name);
    if (access(installed, X_OK) == 0) {
        *ret_path = strdup(installed);
        return *ret_path ? 0 : ipb_error_set(err, ENOMEM, "locating %s", name);
    }
    return ipb_error_set(err, ENOENT,
                         "cannot find %s next to this program or at %s; "
                         "run `make` (or `make install`) again",
                         name, installed);
}

int ipb_find_shim(char **ret_path, ipb_error **err) { return ipb_find_libexec("ipybox-shim", ret_path, err); }
