/*
 * secret.c - one reader of secret files for the daemon and the library.
 */
#include "secret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

__attribute__((format(printf, 4, 5)))
static int say(int err, char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* fstat checks: a regular file nobody but its owner may touch. */
static int check_private(int fd, const char *path, char *why, size_t whylen)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return say(-errno, why, whylen, "%s: cannot stat: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return say(-EINVAL, why, whylen, "%s is not a regular file", path);
	if (st.st_mode & (S_IRWXG | S_IRWXO))
		return say(-EPERM, why, whylen, "%s has mode %04o: a secret file must not be open to "
			   "group or others (chmod 600 %s)", path, (unsigned)(st.st_mode & 07777),
			   path);
	return 0;
}

/* Up to len bytes of fd into buf; the count, or -errno. */
static ssize_t read_all(int fd, uint8_t *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int secret_read(const char *path, unsigned flags, size_t min_len, struct secret *out,
		char *why, size_t whylen)
{
	/* One byte for a trailing newline, one more to tell "too long". */
	uint8_t buf[SECRET_MAX + 2];
	ssize_t n = 0;
	size_t len;
	int fd, rc = 0;

	memset(out, 0, sizeof *out);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return say(-errno, why, whylen, "%s: cannot open: %s", path, strerror(errno));
	if (flags & SECRET_PRIVATE) {
		rc = check_private(fd, path, why, whylen);
		if (rc < 0)
			goto out;
	}
	n = read_all(fd, buf, sizeof buf);
	if (n < 0) {
		rc = say((int)n, why, whylen, "%s: cannot read: %s", path, strerror((int)-n));
		goto out;
	}
	len = (size_t)n;
	if (len && buf[len - 1] == '\n')
		len--;
	if (len > SECRET_MAX) {
		rc = say(-EINVAL, why, whylen, "%s: the secret is longer than %d bytes", path,
			 SECRET_MAX);
		goto out;
	}
	if (len < min_len) {
		rc = say(-EINVAL, why, whylen, "%s: the secret is %zu bytes, shorter than %zu", path,
			 len, min_len);
		goto out;
	}
	memcpy(out->bytes, buf, len);
	out->len = len;
out:
	explicit_bzero(buf, sizeof buf);
	close(fd);
	return rc;
}

void secret_wipe(struct secret *s)
{
	explicit_bzero(s, sizeof *s);
}
