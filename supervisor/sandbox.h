/* One sandbox seen from the supervisor: the shim process and its sync socket. */
#pragma once
#include <spawn.h>
#include <stdbool.h>
#include <sys/types.h>

#include "error.h"
#include "monclient.h"
#include "netns.h"
#include "proxy.h"
#include "shim_proto.h"
#include "ulimits.h"

typedef struct ipb_sandbox {
    pid_t pid;             /* the outer shim; -1 when none */
    int fd;                /* sync socket, -1 when none */
    ipb_egress_fds egress; /* the listeners inside its network namespace, from READY */
    ipb_proxy *proxy;      /* serving them, once ipb_sandbox_serve_egress ran */
    uint32_t proxy_id;
    ipb_monitor_sandbox mon; /* system service: the monitor owns the shim (mon.id != 0); user
                              * mode: the limits' event files (ulimits.h) */
    ipb_ulimits_sb ul;       /* user mode: how its limits are applied */
} ipb_sandbox;

#define IPB_SANDBOX_INIT                                                                                               \
    {                                                                                                                  \
        .pid = -1, .fd = -1, .egress = {{-1, -1, -1, -1, -1, -1}}, .mon = {.mem_ev = -1, .pids_ev = -1},               \
        .ul = IPB_ULIMITS_SB_INIT                                                                                      \
    }

/* Starts the shim with the given stdio, sends cfg and waits (up to timeout_ms) until the
 * sandbox is built. A failure comes back as the shim's sentence naming the step. */
int ipb_sandbox_start(const shim_config *cfg, int in_fd, int out_fd, int err_fd, int timeout_ms, ipb_sandbox *ret,
                      ipb_error **err);
/* Waits up to timeout_ms (-1: forever) for the next record. Returns 1 with a record, 0 on
 * timeout, -1 with err when the shim is gone or misbehaves. */
/* Hands the sandbox's egress listeners to the proxy (label names the sandbox in its log).
 * Without this the listeners stay unserved and closed with the sandbox: nothing leaves. */
int ipb_sandbox_serve_egress(ipb_sandbox *sb, ipb_proxy *proxy, const char *label, ipb_error **err);
/* Ends the connections and DNS queries its processes have in the proxy, at once (the
 * listeners stay served): for when its kernel ended. Returns how many were ended. */
unsigned ipb_sandbox_end_egress(ipb_sandbox *sb);
int ipb_sandbox_next(ipb_sandbox *sb, int timeout_ms, struct shim_msg *m, ipb_error **err);
int ipb_sandbox_send(ipb_sandbox *sb, uint32_t type, int32_t arg, uint32_t gen, ipb_error **err);
/* Kills the whole sandbox (SIGKILL to the outer shim ends PID 1 and the pid namespace) and
 * reaps it. Safe to call twice. Returns the shim's wait status or -1. */
int ipb_sandbox_destroy(ipb_sandbox *sb);
/* Waits for the shim to exit by itself; returns its exit code. */
int ipb_sandbox_wait_exit(ipb_sandbox *sb);
/* A sentence for a wait status: "exited with status 3", "was killed by signal 9 (Killed)". */
void ipb_describe_status(int status, char *buf, size_t len);
/* posix_spawn attributes for a child that starts clean: no signal blocked, every handler
 * default; extra_flags adds POSIX_SPAWN_* flags (the caller sets what they need). */
void ipb_spawnattr_clean(posix_spawnattr_t *attr, short extra_flags);
