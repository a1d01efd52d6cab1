/*
 * urldecode.c - see urldecode.h.
 */
#include "urldecode.h"

#include <errno.h>

static int hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int url_decode(const char *v, size_t len, char *out, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		int c = (unsigned char)v[i];

		if (c == '%') {
			if (i + 2 >= len || hex(v[i + 1]) < 0 || hex(v[i + 2]) < 0)
				return -EINVAL;
			c = hex(v[i + 1]) * 16 + hex(v[i + 2]);
			i += 2;
		}
		if (c == 0 || n + 1 >= cap)
			return -EINVAL;
		out[n++] = (char)c;
	}
	if (n == 0)
		return -EINVAL;
	out[n] = '\0';
	return 0;
}
