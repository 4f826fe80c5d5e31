/* A session: its directories, its sandbox and kernel, and the workspace seen from the host.
 * The daemon (a later issue) will hold many; `ipybox mcp` holds one. */
#pragma once
#include "error.h"
#include "hostpath.h"
#include "kernel.h"
#include "mcp_servers.h"
#include "options.h"
#include "proxy.h"
#include "shim_proto.h"
#include "statedir.h"
#include "toolchan.h"

typedef struct ipb_session {
    const ipb_options *opts;
    ipb_session_dirs dirs;
    shim_config cfg;
    ipb_kernel kernel;
    ipb_proxy *proxy;
    int ws_fd;
    int *bind_fds;
    ipb_host_dirs host_dirs; /* the allowed directories, opened at start */
    ipb_mcp_servers mcp;     /* MCP servers whose tools the kernel may call */
    ipb_toolchan *chan;      /* their tool socket in /opt/ipybox */
    char *lost;              /* why the kernel's state was lost since the last cell (a death
                            * between calls), told with the next cell's result; or NULL */
    bool end_told;           /* the sandbox's end was told by the call it failed */
    char no_zygote[32];      /* the variable why this session has no zygote though the options
                            * want one, until told once; or "" */
    bool open;
} ipb_session;

/* proxy serves the sandbox's egress (NULL: nothing leaves it). */
int ipb_session_open(ipb_session *s, const ipb_options *o, ipb_proxy *proxy, ipb_error **err);
/* A running kernel: restarts it if it died, rebuilds the sandbox if that is gone. A death
 * nobody was told of yet is kept in s->lost. */
int ipb_session_ensure_kernel(ipb_session *s, ipb_error **err);
/* The sandbox ended between calls (its PID 1 or its channel is gone): it is taken down, and
 * the next cell is told why. */
void ipb_session_sandbox_lost(ipb_session *s, const char *why);
/* s->lost, handed over (malloc'd; the caller frees it), or NULL. */
char *ipb_session_take_lost(ipb_session *s);
/* What became of the zygote (or why there is none), then what the kernel's start said of itself
 * (that /app could not be entered...), not told yet: one line, malloc'd, or NULL. Each is told
 * once, with the call that started the kernel. */
char *ipb_session_take_start_note(ipb_session *s);
/* A fresh kernel; MCP servers' connections are closed (stdio servers stop) and made again on
 * next use; registrations stay. */
int ipb_session_reset(ipb_session *s, ipb_error **err);
void ipb_session_close(ipb_session *s);
/* Where an /app-relative path lives on the host: the workspace, or a --container-bind
 * directory when the path is below its mount point. */
void ipb_session_locate(ipb_session *s, const char *relpath, int *ret_basefd, const char **ret_sub);
