/*
 * secret.h - reads a tenant's shared secret from its file, for rmemd (the
 * tenants of rmemd.conf(5)) and librmem (rmem_opts.secret_file) alike, so
 * that both sides agree byte for byte on what the secret is.
 *
 * The secret is the file's bytes with one trailing newline stripped, at most
 * SECRET_MAX bytes.  Nothing here logs; the caller is told why in words.
 */
#ifndef RMEM_COMMON_SECRET_H
#define RMEM_COMMON_SECRET_H

#include <stddef.h>
#include <stdint.h>

#define SECRET_MAX 256

/* Refuse a file that is not a regular file or that group or others may
 * touch: a secret others can read is no longer one (the daemon's rule). */
#define SECRET_PRIVATE 0x1u

struct secret {
	uint8_t bytes[SECRET_MAX];
	size_t len;
};

/*
 * Reads path into *out.  Returns 0, or a negative errno with why (if not
 * NULL) set to a sentence that starts with the path:
 *   -errno of open(2), fstat(2), read(2);
 *   -EINVAL  not a regular file (SECRET_PRIVATE), longer than SECRET_MAX,
 *            or shorter than min_len bytes;
 *   -EPERM   open to group or others (SECRET_PRIVATE).
 * *out is zeroed on failure.  Wipe it with secret_wipe() after use.
 */
int secret_read(const char *path, unsigned flags, size_t min_len, struct secret *out,
		char *why, size_t whylen);

/* Zeroes *s in a way the compiler may not drop. */
void secret_wipe(struct secret *s);

#endif /* RMEM_COMMON_SECRET_H */
