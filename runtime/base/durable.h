/* Writing files so that a crash leaves the old version or the new one, never
 * a torn mix: full writes, fsync, rename, fsync of the directory.
 * defines: rl_write_all, rl_sync_parent, rl_copy_file_durable,
 * rl_write_file_durable, rl_make_dirs */
#ifndef RL_BASE_DURABLE_H
#define RL_BASE_DURABLE_H

#include <stddef.h>

/* write(2) until all n bytes are out, through EINTR and short writes. */
int rl_write_all(int fd, const void *p, size_t n);
/* fsync of the directory holding PATH, which makes a rename in it durable. */
int rl_sync_parent(const char *path);
/* Copies SRC to DST through DST.tmp, fsync, rename and rl_sync_parent. */
int rl_copy_file_durable(const char *src, const char *dst, char *err, size_t errlen);
/* Writes the n bytes at p to DST the same way. */
int rl_write_file_durable(const char *dst, const void *p, size_t n, char *err, size_t errlen);
/* mkdir -p: every missing component of DIR, as the user running rlrun;
 * errors begin with KEY, the config key that named DIR. */
int rl_make_dirs(const char *dir, const char *key, char *err, size_t errlen);

#endif
