/* Directory trees under a trusted parent: create with parents, remove without following
 * symlinks (sandbox code may have planted them). Return 0 or -errno. */
#pragma once

int ipb_mkdir_p(const char *path, int mode);
/* Removes path and everything below it; symlinks are removed, never followed. */
int ipb_rm_rf(const char *path);
/* Same, relative to dirfd. */
int ipb_rm_rf_at(int dirfd, const char *name);
/* Removes the contents of the directory open at dirfd, keeping it. */
int ipb_empty_dir_at(int dirfd);
