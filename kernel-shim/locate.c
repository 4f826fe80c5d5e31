#include "shim_proto.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ipb_find_shim(char **ret_path, ipb_error **err) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            char *p = NULL;
            if (asprintf(&p, "%s/../libexec/ipybox/ipybox-shim", exe) >= 0) {
                if (access(p, X_OK) == 0) {
                    *ret_path = p;
                    return 0;
                }
                free(p);
            }
        }
    }
    const char *installed = IPYBOX_LIBEXECDIR "/ipybox/ipybox-shim";
    if (access(installed, X_OK) == 0) {
        *ret_path = strdup(installed);
        return *ret_path ? 0 : ipb_error_set(err, ENOMEM, "locating ipybox-shim");
    }
    return ipb_error_set(err, ENOENT,
                         "cannot find ipybox-shim next to this program or at %s; "
                         "run `make` (or `make install`) again",
                         installed);
}
