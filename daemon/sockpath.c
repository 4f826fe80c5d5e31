/* Where a user's daemon listens by convention: $XDG_RUNTIME_DIR/ipybox/ipybox.sock, else (a
 * client such as the TypeScript SDK's stdio transport passes no XDG_RUNTIME_DIR) the same
 * under /run/user/$UID when that directory is this user's alone. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "strbuf.h"

/* A directory that no other user controls: ours, and not writable by group or others. A
 * missing one counts as private when missing_ok (the daemon makes it 0700). */
static bool private_dir(const char *path, uid_t uid, bool missing_ok) {
    struct stat st;
    if (lstat(path, &st) < 0)
        return missing_ok && errno == ENOENT;
    return S_ISDIR(st.st_mode) && st.st_uid == uid && !(st.st_mode & 022);
}

char *ipbd_runtime_dir_fallback(void) {
    uid_t uid = geteuid();
    char dir[64], sub[80];
    snprintf(dir, sizeof(dir), "/run/user/%u", (unsigned)uid);
    snprintf(sub, sizeof(sub), "%s/ipybox", dir);
    if (!private_dir(dir, uid, false) || !private_dir(sub, uid, true))
        return NULL;
    return ipb_strdupf("%s", dir);
}

char *ipbd_default_socket(void) {
    const char *rt = getenv("XDG_RUNTIME_DIR");
    if (rt && rt[0] == '/')
        return ipb_strdupf("%s/ipybox/ipybox.sock", rt);
    if (rt && rt[0])
        return NULL;
    char *dir = ipbd_runtime_dir_fallback();
    char *sock = dir ? ipb_strdupf("%s/ipybox/ipybox.sock", dir) : NULL;
    free(dir);
    return sock;
}
