/* The sandbox's filesystem as data: an ordered list of steps the shim carries out below the
 * new root before pivot_root. Built here (pure), executed by kernel-shim/rootfs.c. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "options.h"

enum ipb_mount_kind {
    IPB_MNT_BIND_RO = 1, /* src (host) -> dst, read-only, nosuid, nodev */
    IPB_MNT_BIND_RW,     /* src (host) -> dst, read-write, nosuid, nodev */
    IPB_MNT_BIND_DEV,    /* device node src -> dst, nosuid, noexec */
    IPB_MNT_TMPFS,       /* tmpfs at dst; data = mount options; nosuid, nodev */
    IPB_MNT_DIR,         /* mkdir dst */
    IPB_MNT_FILE,        /* regular file at dst with content data (read-only once root is) */
    IPB_MNT_SYMLINK,     /* symlink dst -> src */
    IPB_MNT_PROC,        /* fresh procfs at dst */
    IPB_MNT_MASK,        /* hide dst: /dev/null over a file, an empty read-only tmpfs over a dir */
    IPB_MNT_READONLY,    /* make the existing dst read-only */
    IPB_MNT_DEVPTS,      /* a private devpts instance at dst (IPython's `!cmd` runs under a pty) */
};

#define IPB_MNT_OPTIONAL 0x1u /* skip when the source (or, for MASK/READONLY, dst) is missing */
#define IPB_MNT_MIRROR 0x2u   /* a source that is a symlink becomes the same symlink */
#define IPB_MNT_USER                                                                                                   \
    0x4u                /* a user's tree (workspace, state, binds): in system mode the
                               * worker opens it with the user's rights and the monitor makes
                               * it an idmapped mount */
#define IPB_MNT_FD 0x8u /* system mode: the next mount fd of the shim, not src */
#define IPB_MNT_SAME                                                                                                   \
    0x10u /* src must be the file id recorded when the supervisor resolved
                                * it (a user-named tree): what the shim binds (or the monitor
                                * opens) is checked to be that very directory, so a symlink
                                * swapped in on the way since is refused, not followed */

/* A file's identity: (st_dev, st_ino). {0, 0}: "not there". */
typedef struct ipb_file_id {
    uint64_t dev, ino;
} ipb_file_id;

typedef struct ipb_mount {
    uint32_t kind;
    uint32_t flags;
    char *src;
    char *dst;      /* absolute path in the sandbox */
    char *data;     /* tmpfs options or file content */
    ipb_file_id id; /* IPB_MNT_SAME: what src must be */
} ipb_mount;

typedef struct ipb_mount_plan {
    ipb_mount *m;
    size_t n;
} ipb_mount_plan;

typedef struct ipb_plan_input {
    const ipb_options *opts;
    const char *workspace;           /* host directory behind /app */
    const char *home;                /* host directory behind /home/appuser */
    const char *rundir;              /* host directory behind /run/ipybox, or NULL */
    const char *mcpdir;              /* host directory behind /opt/ipybox (read-only), or NULL */
    const ipb_file_id *workspace_id; /* what workspace must be when bound, or NULL */
    const ipb_file_id *bind_ids;     /* the same for each --container-bind source, or NULL */
    const ipb_file_id *home_id;      /* the same for home (`ipybox run --home`), or NULL */
    /* --python's environment (supervisor/pyhost.h): host trees bound read-only at their own
     * paths, each checked by identity (python_ids, or none when NULL). */
    size_t n_python;
    char *const *python_prefixes;
    const ipb_file_id *python_ids;
} ipb_plan_input;

/* The workspace: a tree that sandbox code writes and that outlives the session, so whatever
 * is in it (a symlink left by an earlier session) is never followed when mounting there. */
#define IPB_SANDBOX_APP "/app"
#define IPB_SANDBOX_USER "appuser"
#define IPB_SANDBOX_UID 1000
#define IPB_SANDBOX_HOME "/home/appuser"
#define IPB_SANDBOX_RUNDIR "/run/ipybox"
/* The generated MCP tool package (mcptools/) and the tool socket, read-only. */
#define IPB_SANDBOX_MCPDIR "/opt/ipybox"
#define IPB_SANDBOX_HOSTNAME "ipybox"

int ipb_mount_plan_build(const ipb_plan_input *in, ipb_mount_plan *ret, ipb_error **err);
int ipb_mount_plan_add(ipb_mount_plan *p, uint32_t kind, uint32_t flags, const char *src, const char *dst,
                       const char *data);
void ipb_mount_plan_free(ipb_mount_plan *p);
