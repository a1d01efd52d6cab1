/*
 * config_num.c - see config_num.h.
 *
 * libconfig 1.5 reads a plain integer literal into an int and silently
 * truncates what does not fit ("size = 5368709120;" becomes 1 GiB), and has no
 * way to tell afterwards.  So the text of every file it read is scanned for
 * such literals: comments and strings skipped, names skipped whole (they may
 * contain digits), floats and "L"-suffixed 64-bit literals left alone.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_num.h"

/* Config files are small; anything past READ_MAX is not one. */
#define READ_MAX (16u << 20)

/* A character of a setting's name (or of @include, or a '*' wildcard). */
static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '*' || c == '@';
}

static const char *skip_number(const char *p, bool *truncated)
{
	const char *start = p;
	bool hex = false;
	long long v;

	if (*p == '+' || *p == '-')
		p++;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		hex = true;
		p += 2;
		while ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
		       (*p >= 'A' && *p <= 'F'))
			p++;
	} else {
		while (*p >= '0' && *p <= '9')
			p++;
		if (*p == '.' || *p == 'e' || *p == 'E') {
			while ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' ||
			       *p == 'E' || ((*p == '+' || *p == '-') &&
					     (p[-1] == 'e' || p[-1] == 'E')))
				p++;
			return p;
		}
	}
	if (*p == 'L') {
		while (*p == 'L')
			p++;
		return p;
	}
	errno = 0;
	v = strtoll(start, NULL, hex ? 16 : 10);
	*truncated = errno == ERANGE || v > INT_MAX || v < INT_MIN;
	return p;
}

static const char *skip_to(const char *p, const char *end_marker)
{
	const char *q = strstr(p, end_marker);

	return q ? q : p + strlen(p);
}

int config_num_find_truncated(const char *text, const char **literal, int *literal_len)
{
	int line = 1;

	for (const char *p = text; *p;) {
		const char *start = p, *q;
		bool truncated = false;

		if (*p == '"') {
			for (p++; *p && *p != '"'; p++)
				if (*p == '\\' && p[1])
					p++;
		} else if (*p == '#' || (p[0] == '/' && p[1] == '/')) {
			p = skip_to(p, "\n");
			continue;
		} else if (p[0] == '/' && p[1] == '*') {
			p = skip_to(p + 2, "*/");
		} else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			   *p == '*' || *p == '@') {
			while (name_char(*p))
				p++;
			continue;
		} else if ((*p >= '0' && *p <= '9') ||
			   ((*p == '-' || *p == '+') && p[1] >= '0' && p[1] <= '9')) {
			p = skip_number(p, &truncated);
			if (truncated) {
				*literal = start;
				*literal_len = (int)(p - start);
				return line;
			}
			continue;
		}
		/* Count the newlines of the token skipped, then step past its end. */
		for (q = start; q < p; q++)
			line += *q == '\n';
		if (*p == '\n')
			line++;
		if (*p)
			p++;
	}
	return 0;
}

char *config_num_read_text(const char *path)
{
	size_t len = 0, cap = 0;
	char *text = NULL;
	FILE *f = fopen(path, "re");

	if (!f)
		return NULL;
	for (;;) {
		size_t n;

		if (cap - len < 2) {
			char *bigger = cap < READ_MAX ? realloc(text, cap + 8192) : NULL;

			if (!bigger)
				goto fail;
			text = bigger;
			cap += 8192;
		}
		n = fread(text + len, 1, cap - len - 1, f);
		if (!n)
			break;
		len += n;
	}
	if (ferror(f))
		goto fail;
	text[len] = '\0';
	fclose(f);
	return text;
fail:
	free(text);
	fclose(f);
	return NULL;
}

