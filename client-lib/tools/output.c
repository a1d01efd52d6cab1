/*
 * output.c - rmemctl's output: sizes and durations as people read them,
 * aligned tables, and JSON strings that are always valid UTF-8.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

/* ---- text helpers --------------------------------------------------------------- */

void format_size(char *buf, size_t size, uint64_t bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double value = (double)bytes;
	size_t unit = 0;

	if (bytes < 1024) {
		snprintf(buf, size, "%" PRIu64 " B", bytes);
		return;
	}
	value /= 1024;
	/* 1023.95 would print as "1024.0": move to the next unit instead. */
	while (value >= 1023.95 && unit + 1 < sizeof(units) / sizeof(units[0])) {
		value /= 1024;
		unit++;
	}
	snprintf(buf, size, "%.1f %s", value, units[unit]);
}

void format_duration(char *buf, size_t size, uint64_t ms)
{
	uint64_t s = ms / 1000;

	if (s < 60)
		snprintf(buf, size, "%" PRIu64 ".%01" PRIu64 "s", s, ms % 1000 / 100);
	else if (s < 3600)
		snprintf(buf, size, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, size, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s % 3600 / 60);
	else
		snprintf(buf, size, "%" PRIu64 "d%02" PRIu64 "h", s / 86400, s % 86400 / 3600);
}

/* Names come from the daemon: never let them move the terminal's cursor. */
void printable(char *dst, size_t size, const char *src)
{
	size_t i;

	for (i = 0; i + 1 < size && src[i]; i++)
		dst[i] = (unsigned char)src[i] < 0x20 || src[i] == 0x7f ? '?' : src[i];
	dst[i] = '\0';
}

/* ---- tables --------------------------------------------------------------------- */

static char *cell(const struct table *t, size_t row, size_t col)
{
	return t->cells + (row * t->ncols + col) * CELL_MAX;
}

int table_add_row(struct table *t)
{
	if (t->rows == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		char *cells = realloc(t->cells, cap * t->ncols * CELL_MAX);

		if (!cells)
			return -ENOMEM;
		t->cells = cells;
		t->cap = cap;
	}
	t->rows++;
	return 0;
}

void table_set(struct table *t, size_t col, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cell(t, t->rows - 1, col), CELL_MAX, fmt, ap);
	va_end(ap);
}

void table_print(const struct table *t)
{
	size_t width[16] = { 0 };

	for (size_t col = 0; col < t->ncols && col < 16; col++) {
		width[col] = strlen(t->cols[col].title);
		for (size_t row = 0; row < t->rows; row++) {
			size_t len = strlen(cell(t, row, col));

			if (len > width[col])
				width[col] = len;
		}
	}
	for (size_t row = 0; row <= t->rows; row++) {
		for (size_t col = 0; col < t->ncols && col < 16; col++) {
			const char *text = row == 0 ? t->cols[col].title : cell(t, row - 1, col);
			bool last = col + 1 == t->ncols;

			if (t->cols[col].right)
				printf("%*s", (int)width[col], text);
			else if (last)
				printf("%s", text);
			else
				printf("%-*s", (int)width[col], text);
			printf(last ? "\n" : "  ");
		}
	}
}

int table_print_items(const struct column *cols, size_t ncols, const void *items, size_t n,
		      size_t size, void (*row)(struct table *t, const void *item, const void *arg),
		      const void *arg)
{
	struct table t = { .cols = cols, .ncols = ncols };

	for (size_t i = 0; i < n; i++) {
		if (table_add_row(&t) < 0) {
			table_free(&t);
			return -ENOMEM;
		}
		row(&t, (const char *)items + i * size, arg);
	}
	table_print(&t);
	table_free(&t);
	return 0;
}

void table_free(struct table *t)
{
	free(t->cells);
	t->cells = NULL;
}

/* ---- JSON ----------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s, or 0 if it is not one. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and values past U+10FFFF are not UTF-8. */
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* A JSON string; bytes that are not UTF-8 become U+FFFD. */
void json_text(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	putchar('"');
	while (*p) {
		size_t n = utf8_len(p);

		if (n == 0) {
			fputs("\\ufffd", stdout);
			p++;
		} else if (*p == '"' || *p == '\\') {
			printf("\\%c", *p++);
		} else if (*p == '\n') {
			fputs("\\n", stdout), p++;
		} else if (*p == '\t') {
			fputs("\\t", stdout), p++;
		} else if (*p < 0x20 || *p == 0x7f) {
			printf("\\u%04x", *p++);
		} else {
			fwrite(p, 1, n, stdout);
			p += n;
		}
	}
	putchar('"');
}

void json_u64(const char *key, uint64_t value, bool more)
{
	printf("\"%s\":%" PRIu64 "%s", key, value, more ? "," : "");
}

void json_str(const char *key, const char *value, bool more)
{
	printf("\"%s\":", key);
	json_text(value);
	printf("%s", more ? "," : "");
}

void json_bool(const char *key, bool value, bool more)
{
	printf("\"%s\":%s%s", key, value ? "true" : "false", more ? "," : "");
}

void json_list(const char *key, const void *items, size_t n, size_t size,
	       void (*members)(const void *item))
{
	printf("{\"%s\":[", key);
	for (size_t i = 0; i < n; i++) {
		printf("%s{", i ? "," : "");
		members((const char *)items + i * size);
		printf("}");
	}
	printf("]}\n");
}
