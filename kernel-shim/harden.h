/* The last steps before exec of the sandboxed program, each its own call. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* Writes single-id maps for the caller's own user namespace: inside_uid -> outside_uid. */
int shim_write_id_maps(pid_t pid, uid_t inside_uid, uid_t outside_uid, gid_t inside_gid, gid_t outside_gid,
                       ipb_error **err);
/* Empties the bounding and ambient sets; call while still holding CAP_SETPCAP. */
int shim_drop_bounding_caps(ipb_error **err);
/* Clears the effective, permitted and inheritable sets. */
int shim_clear_caps(ipb_error **err);
/* Loads a compiled seccomp program (no_new_privs must already be set). */
int shim_apply_seccomp(const uint8_t *bpf, size_t len, ipb_error **err);
