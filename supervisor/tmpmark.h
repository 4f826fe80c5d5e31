/* Named temporary files (`.ipybox-tmp-<16 hex>`) in the trees a sandbox sees (its workspace,
 * its binds), and their removal after a crash.
 *
 * Writes into those trees go to an unnamed O_TMPFILE file linked into place when done
 * (files.c), so a killed supervisor leaves nothing there. A name is used only where that is
 * not possible (a file system without O_TMPFILE, no /proc) and for the instant between the
 * link under a temporary name and the rename over an existing file. Before such a name is
 * made, the tree is marked in the state directory (`tmp-pending/<dev>-<ino>.<pid>`, removed
 * again once this process has no such name left in that tree); a session that starts on a
 * marked tree while no live session holds it (treehold.c) sweeps the tree for them. */
#pragma once
#include <stdbool.h>

/* Whether name is one of ours: ".ipybox-tmp-" and exactly 16 lowercase hex digits. */
bool ipb_tmp_name_is_ours(const char *name);

/* Where marks go: <state>/tmp-pending (created). Without it, nothing is marked. Called once,
 * when the session's directories are made; returns 0 or -errno. */
int ipb_tmp_marks_open(const char *state);

/* Around the life of a named temporary file in the tree whose root is tree_fd (-1: a tree
 * no sandbox sees, nothing to mark). Thread-safe; best effort (a mark that cannot be made
 * only means no sweep). */
void ipb_tmp_mark(int tree_fd);
void ipb_tmp_unmark(int tree_fd);

/* When tree_fd's tree is marked: removes our temporary files in it (regular files with our
 * name pattern; symlinks are not followed, other file systems mounted inside not entered)
 * and the marks. Call only while holding the tree exclusively (no live session uses it).
 * Returns how many files were removed. */
int ipb_tmp_sweep(int tree_fd);
/* The same without looking for a mark. */
int ipb_tmp_sweep_tree(int tree_fd);
