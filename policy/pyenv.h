/* --python: which host trees a sandbox needs to run the interpreter the user named, worked out
 * from the files of its environment without running it (supervisor/pyhost.c does the I/O).
 * Pure string work: pyvenv.cfg as Python's own start-up (getpath) reads it, and the rules for
 * where such a tree may appear inside the sandbox (at its own path). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* pyvenv.cfg is a few lines; anything larger is not one. */
#define IPB_PYVENV_MAX (64u << 10)

/* The `home = DIR` of a venv's pyvenv.cfg (text of len bytes, not NUL-terminated): the
 * directory of the base interpreter. As Python does: lines split at the first '=', the key
 * compared without surrounding blanks and case, the first `home` wins, the value without
 * surrounding blanks. Refused: no home line, a home that is not a plain absolute path (no '.',
 * '..', '//' or control characters), a NUL in the file, a file over IPB_PYVENV_MAX. path: for
 * messages. *ret_home: malloc'd. */
int ipb_pyvenv_home(const char *text, size_t len, const char *path, char **ret_home, ipb_error **err);

/* The prefix of an interpreter whose executable is in dir (canonical): dir's parent when dir is
 * named bin (PREFIX/bin/python, the layout of CPython, venv, pyenv, conda and uv), else dir
 * itself. malloc'd, or NULL when out of memory. */
char *ipb_python_prefix_of(const char *dir);

/* Whether canonical path p lies in the host's system directories that every sandbox sees
 * already (/usr, /bin, /sbin, /lib*): an interpreter there needs no bind. */
bool ipb_python_in_system_dirs(const char *p);

/* Whether a host tree bound at its own path, prefix (canonical), would be or hold or lie
 * inside one of the sandbox's own places (/, /etc, /proc, /dev, /sys, /run, /app,
 * /home/appuser, /opt/ipybox, /tmp, /var/tmp): the place, with *ret_inside saying which way,
 * or NULL when it fits. */
const char *ipb_python_place_conflict(const char *prefix, bool *ret_inside);

/* Whether canonical path p is tree or below it. */
bool ipb_path_within_tree(const char *p, const char *tree);
