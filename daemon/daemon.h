/* ipyboxd: the supervisor as a daemon. It listens on a unix socket, speaks the same MCP as
 * `ipybox mcp` to every client that connects, plus session management (ipybox/createSession,
 * attachSession, listSessions, closeSession), and runs each session in its own worker process:
 * `ipybox mcp --embedded` re-executed from the same binary, which owns the sandbox, the kernel
 * and the egress proxy. The daemon only routes messages between clients and workers. */
#pragma once
#include <stdbool.h>
#include <sys/types.h>

#include "error.h"

#define IPBD_NAME_MAX 64
/* The JSON-RPC error of a call whose session was closed or ended (told to each client that
 * was attached to it until it creates or attaches another): a server error of ours, not a
 * fault. */
#define IPBD_SESSION_GONE (-32000)

typedef struct ipbd_config {
    int listen_fd;           /* bound, listening unix stream socket */
    const char *socket_path; /* for messages */
    uid_t uid;               /* the only uid allowed to connect (SO_PEERCRED) */
    const char *self_exe;    /* the binary re-executed as each session's worker */
    char **session_args;     /* sandbox options every session starts with (NULL-terminated) */
    long idle_timeout_ms;    /* a named session with no client and no call is closed after this */
    unsigned max_sessions;
    unsigned warm; /* sessions kept started ahead, with session_args only */
    unsigned max_clients;
    int monitor_fd; /* the channel to a monitor that adopts one for each worker: the system
                               * service's (frontend), or root's private one; else -1 */
    bool frontend;  /* started by the system service's monitor for a user */
} ipbd_config;

/* Serves until SIGTERM, SIGINT or SIGHUP, then closes every session (their workers stop their
 * sandboxes) and returns 0; -1 with *err if the loop cannot be set up. */
int ipbd_serve(const ipbd_config *cfg, ipb_error **err);

/* `ipyboxd` (argv[0] is ipyboxd): options, the socket, then ipbd_serve(). */
int ipbd_main(int argc, char **argv);

/* Where a user's daemon listens by convention: $XDG_RUNTIME_DIR/ipybox/ipybox.sock; without
 * XDG_RUNTIME_DIR, /run/user/$UID/ipybox/ipybox.sock when /run/user/$UID (and its ipybox/, if
 * there) is this user's and not writable by others; else NULL. malloc'd. sockpath.c */
char *ipbd_default_socket(void);
/* /run/user/$UID when it is this user's alone (as above), else NULL. malloc'd. */
char *ipbd_runtime_dir_fallback(void);
/* Whether a session name is acceptable: 1 to 64 of [A-Za-z0-9._-], not starting with '.' or '-'. */
bool ipbd_valid_name(const char *name);
