/* --python PATH: an interpreter anywhere on the host (Debian's, a venv, pyenv, conda, uv),
 * made runnable in the sandbox by binding its environment's trees read-only at their own
 * paths. Nothing of the host is run to find them: the interpreter is the user's code, and
 * running it on the host, outside any sandbox, only to ask it where it lives would trust a
 * tree that may be shared with sandboxes (a venv in a workspace) with the user's whole
 * account. The files tell enough: PREFIX/bin/python, and for a venv its pyvenv.cfg `home`
 * (policy/pyenv.h). */
#pragma once
#include <stddef.h>

#include "error.h"
#include "mountplan.h"
#include "options.h"

#define IPB_PYTHON_MAX_PREFIXES 3

typedef struct ipb_python_env {
    char *exec; /* the interpreter's path, the same inside the sandbox; NULL: as given */
    size_t n;   /* the trees to bind read-only at their own paths (none under /usr etc.) */
    char *prefix[IPB_PYTHON_MAX_PREFIXES];
    ipb_file_id id[IPB_PYTHON_MAX_PREFIXES];
} ipb_python_env;

/* Resolves python (absolute) on the host: the interpreter must be an executable regular file;
 * a venv's base interpreter must exist; no tree may cover a place of the sandbox's own, the
 * state directory (state) or the whole home directory (home, may be NULL). Symlinks are
 * followed except one inside a tree a sandbox could write (hostpath.h). A venv's base, named by
 * its pyvenv.cfg (text that sandbox code may have written), must be an interpreter's prefix
 * (lib/python3.X/os.py) outside trees (ipb_sandbox_trees, may be NULL). */
int ipb_python_env_resolve(const char *python, const char *state, const char *home, const ipb_strv *trees,
                           ipb_python_env *ret, ipb_error **err);
void ipb_python_env_free(ipb_python_env *e);
