/* A worker's side of the monitor's channel (system service only): the sandbox is started and
 * killed by the monitor, which owns it; everything else is as in user mode. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "options.h"
#include "shim_proto.h"

/* The environment variable naming the channel's fd, set by the frontend for each worker. */
#define IPB_MONITOR_FD_ENV "IPYBOX_MONITOR_FD"

/* The channel to the monitor, or -1 in user mode. Read from the environment at the first call
 * (the variable is removed, the fd made close-on-exec). Without one, a process run by root
 * starts a private monitor (a worker's channel) at the first call: root's sandboxes run in
 * the system service's uid pool like everyone else's, never as root. */
int ipb_monitor_fd(void);
/* Starts `ipyboxd --private-monitor` (the system service's monitor code, serving root alone)
 * and returns our end of its channel: a worker's (SPAWN, KILL) or, when frontend, one that
 * adopts a channel for each worker (ipyboxd --user run by root). The channel is returned even
 * when the monitor could not start (it then answers nothing, or an ERROR saying why): no
 * sandbox ever falls back to running as root. -1 only without a socket. */
int ipb_monitor_start_private(bool frontend);
/* The daemon's private monitor (frontend) hung up on fd, our end of its channel: starts
 * another exactly as the first (ipb_monitor_start_private), closes fd and reaps the old
 * monitor. Returns our end of the new channel, or -1 with err (fd then stays open): a monitor
 * that kept ending before it served anything is not started again for a while
 * (monrespawn.h). A worker's private
 * monitor is replaced by ipb_monitor_spawn itself, when a request finds it gone. */
int ipb_monitor_private_replace(int fd, ipb_error **err);
/* The daemon's private monitor answered a request (monrespawn.h). */
void ipb_monitor_private_served(void);
/* Limits asked for each sandbox (0: the service's default). */
void ipb_monitor_set_limits(const ipb_options *o);

typedef struct ipb_monitor_sandbox {
    uint32_t id;
    uint32_t gen;        /* the channel it was started on (ids are per channel) */
    pid_t pid;           /* the shim on the host (for messages) */
    int mem_ev, pids_ev; /* the cgroup's event files, or -1 */
    uint32_t limits;     /* enum ipbm_limits */
    uint64_t memory_max;
    uint32_t pids_max;
} ipb_monitor_sandbox;

/* Asks the monitor to start the shim with this stdio and sync socket end; the plan's
 * IPB_MNT_FD sources are opened here, with this process's (the user's) rights. When the
 * channel's monitor is gone (killed: its sandboxes went with it), root's ipybox first starts
 * a private monitor in its place, exactly as ipb_monitor_fd starts the first (a worker of
 * root's daemon, whose channel was adopted, then has one of its own); a worker of the system
 * service gets an error saying the service's monitor is gone. */
int ipb_monitor_spawn(const shim_config *cfg, int in_fd, int out_fd, int err_fd, int sync_fd, ipb_monitor_sandbox *ret,
                      ipb_error **err);
/* A sub-channel of ours (ADOPT, mon_proto.h) for a process this one starts and hands it to
 * as IPB_MONITOR_FD_ENV (`ipybox run` for a sandboxed MCP server): its sandboxes are made by
 * the same monitor, in the same uid pool and cgroups, and are killed when that process or
 * this one is gone. Returns the fd (close-on-exec), or -1 with err (no channel here, the
 * monitor refused or is gone). */
int ipb_monitor_adopt(ipb_error **err);
/* SIGKILL (when kill_first) and wait up to timeout_ms for the end; returns the wait status
 * or -1. Closes the event fds. */
int ipb_monitor_end(ipb_monitor_sandbox *s, bool kill_first, int timeout_ms);
/* Counters from the cgroup's event files: out-of-memory kills and refused forks (0 when not
 * known). */
void ipb_monitor_events(const ipb_monitor_sandbox *s, uint64_t *oom_kills, uint64_t *pids_max_hits);
