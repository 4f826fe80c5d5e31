/* ipybox-shim: started by the supervisor with the sync socket on fd 3; builds the sandbox
 * from inside and becomes its PID 1. Not meant to be run by hand. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "contain.h"
#include "shim_proto.h"

int main(int argc, char **argv) {
    struct stat st;
    /* The sandbox's umask is ours, not whatever started us (a service's UMask=0077 would make
     * the root's /home 0700 and the kernel's home unreachable): the directories built for the
     * root and the files the kernel makes in /app get 0755 / 0644, as in ipybox's container. */
    umask(022);
    /* Only the system service's monitor starts the shim with `--system N` (N: the mounts it
     * passed from SHIM_MOUNT_FD0 on; a worker cannot choose the monitor's argv); the
     * configuration, written by a worker, must agree. */
    bool system = argc == 3 && !strcmp(argv[1], "--system");
    char *end = NULL;
    unsigned long mount_fds = system ? strtoul(argv[2], &end, 10) : 0;
    if (system && (!*argv[2] || *end || mount_fds > 64))
        system = false;
    if ((argc != 1 && !system) || fstat(SHIM_SYNC_FD, &st) < 0 || !S_ISSOCK(st.st_mode)) {
        fprintf(stderr, "ipybox-shim: this program is started by ipybox; it is not meant to be run by hand\n");
        return 2;
    }
    uint8_t *buf = malloc(SHIM_CONFIG_MAX);
    if (!buf)
        return 1;
    ssize_t n;
    do
        n = recv(SHIM_SYNC_FD, buf, SHIM_CONFIG_MAX, MSG_TRUNC);
    while (n < 0 && errno == EINTR);
    if (n <= 0 || n > (ssize_t)SHIM_CONFIG_MAX) {
        shim_send(SHIM_SYNC_FD, SHIM_EV_ERROR, 0, n < 0 ? errno : EMSGSIZE, 0, "configuration",
                  "cannot read the sandbox configuration");
        return 1;
    }
    shim_config cfg;
    ipb_error *err = NULL;
    if (shim_config_decode(buf, (size_t)n, &cfg, &err) < 0) {
        shim_send(SHIM_SYNC_FD, SHIM_EV_ERROR, 0, err->errnum, 0, "configuration", ipb_error_msg(err));
        return 1;
    }
    free(buf);
    if ((cfg.system != 0) != system || (system && (!cfg.root || strcmp(cfg.root, SHIM_SYSTEM_ROOT)))) {
        shim_send(SHIM_SYNC_FD, SHIM_EV_ERROR, 0, EPERM, 0, "configuration",
                  "the configuration's system mode does not match how the shim was started");
        return 1;
    }
    cfg.mount_fds = (unsigned)mount_fds;
    shim_contain(SHIM_SYNC_FD, &cfg);
}
