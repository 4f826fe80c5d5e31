/* --memory, --max-processes and --cpu-weight without the system service (ipybox mcp, ipybox
 * run, ipyboxd --user's workers, run by a user other than root: root's go through a private
 * monitor, monclient.h): no monitor. Chosen once per process, best first:
 *   scope    a transient scope of the user's systemd manager for each sandbox (the shim is
 *            started through `systemd-run --user --scope`, which execs it inside) with
 *            MemoryMax, MemorySwapMax=0, TasksMax and CPUWeight: cgroup v2 in the subtree
 *            systemd delegates to the user. systemd removes the scope once its last process is
 *            gone, also when the supervisor was SIGKILLed (the sandbox dies with it).
 *   cgroup1  a cgroup of our own per sandbox in the v1 memory, pids (and cpu) hierarchies, where
 *            this user may write there (a subtree the administrator gave the user); those of a
 *            supervisor that is gone are removed at the next start.
 *   rlimit   RLIMIT_NPROC set inside the sandbox's user namespace, where the kernel counts the
 *            sandbox's processes apart from the user's others (not for uid 0, which the kernel
 *            exempts), and RLIMIT_AS, which bounds each process, not the sandbox. No CPU share.
 * What a choice cannot enforce is said once, in one line on stderr. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "monclient.h"
#include "options.h"
#include "shim_proto.h"

/* Set by ipyboxd --user once it has said what cannot be enforced: its workers do not repeat it. */
#define IPB_ULIMITS_TOLD_ENV "IPYBOX_LIMITS_TOLD"

enum ipb_ulimits_kind { IPB_ULIMITS_NONE, IPB_ULIMITS_SCOPE, IPB_ULIMITS_CGROUP1, IPB_ULIMITS_RLIMIT };

/* Takes the options' limits and chooses how to apply them (nothing when none is asked for);
 * prints the one line of what cannot be enforced. Once per process; later calls return the
 * first choice. */
enum ipb_ulimits_kind ipb_ulimits_setup(const ipb_options *o);
/* A sentence for logs: which mechanism applies which limit. */
const char *ipb_ulimits_describe(void);
/* What ipb_ulimits_setup would choose for these limits, without choosing it or saying
 * anything: the kind, in desc the sentence ipb_ulimits_describe would give, and in notice
 * what could not be enforced ("" when all can). For ipybox doctor. */
enum ipb_ulimits_kind ipb_ulimits_probe(uint64_t memory_max, unsigned pids_max, unsigned cpu_weight, char *desc,
                                        size_t desclen, char *notice, size_t nlen);

/* One sandbox's share, between ipb_ulimits_prepare and ipb_ulimits_release. */
typedef struct ipb_ulimits_sb {
    int kind;            /* enum ipb_ulimits_kind as applied to this sandbox */
    int slot;            /* cgroup1: our counter, -1 when none */
    int mem_ev, pids_ev; /* cgroup1: the event files until attached */
    char unit[64];       /* scope: the unit's name */
} ipb_ulimits_sb;

#define IPB_ULIMITS_SB_INIT                                                                                            \
    { .kind = IPB_ULIMITS_NONE, .slot = -1, .mem_ev = -1, .pids_ev = -1 }

/* Before the shim starts: makes the cgroups (cgroup1), names the scope, and sets the
 * rlimits in cfg (a copy the caller encodes). For a scope, *ret_path and ret_argv (up to 24
 * entries, NULL-terminated) are what to run instead of the shim, and envp (up to 4) its
 * environment; otherwise they are left alone. */
int ipb_ulimits_prepare(ipb_ulimits_sb *u, shim_config *cfg, const char *shim, const char **ret_path, char **ret_argv,
                        char **envp, ipb_error **err);
/* Right after the spawn, before the shim has its configuration (and so before it forks):
 * moves it into the cgroups (cgroup1). */
int ipb_ulimits_enter(ipb_ulimits_sb *u, pid_t pid, ipb_error **err);
/* Once the sandbox is up: opens the cgroup's event files into mon (with the limits as
 * applied) for the cell's report. */
void ipb_ulimits_attach(ipb_ulimits_sb *u, pid_t pid, ipb_monitor_sandbox *mon);
/* A sandbox of this kind ended without a word: when it was to run in a scope, systemd-run
 * could not make it. Then the next best mechanism applies from now on, said in one line, and
 * true means a retry makes sense. */
bool ipb_ulimits_scope_failed(int kind, int wait_status);
/* After the sandbox ended: removes its cgroups (cgroup1), closes mon's event files. */
void ipb_ulimits_release(ipb_ulimits_sb *u, ipb_monitor_sandbox *mon);
/* For a cell's report under rlimits (no event counters): the limits as set, 0 when none. */
void ipb_ulimits_rlimit_values(uint64_t *memory_max, unsigned *pids_max);
