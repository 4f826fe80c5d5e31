/* A session: its directories, its sandbox and kernel, and the workspace seen from the host.
 * The daemon (a later issue) will hold many; `ipybox mcp` holds one. */
#pragma once
#include "error.h"
#include "kernel.h"
#include "options.h"
#include "proxy.h"
#include "shim_proto.h"
#include "statedir.h"

typedef struct ipb_session {
    const ipb_options *opts;
    ipb_session_dirs dirs;
    shim_config cfg;
    ipb_kernel kernel;
    ipb_proxy *proxy;
    int ws_fd;
    int *bind_fds;
    bool open;
} ipb_session;

/* proxy serves the sandbox's egress (NULL: nothing leaves it). */
int ipb_session_open(ipb_session *s, const ipb_options *o, ipb_proxy *proxy, ipb_error **err);
/* A running kernel: restarts it if it died, rebuilds the sandbox if that is gone. */
int ipb_session_ensure_kernel(ipb_session *s, ipb_error **err);
int ipb_session_reset(ipb_session *s, ipb_error **err);
void ipb_session_close(ipb_session *s);
/* Where an /app-relative path lives on the host: the workspace, or a --container-bind
 * directory when the path is below its mount point. */
void ipb_session_locate(ipb_session *s, const char *relpath, int *ret_basefd, const char **ret_sub);
