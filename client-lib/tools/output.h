/*
 * output.h - rmemctl's output helpers: human-readable figures, aligned
 * tables and JSON text, all to stdout.
 */
#ifndef RMEMCTL_OUTPUT_H
#define RMEMCTL_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest text of one table cell, NUL included: a region's name
 * (RMEM_NAME_MAX, 255 bytes) fits whole. */
#define CELL_MAX 256

/* "512 B", "1.5 KiB", ... "2.0 TiB" into buf. */
void format_size(char *buf, size_t size, uint64_t bytes);
/* "12.3s", "4m05s", "3h02m", "2d04h" into buf. */
void format_duration(char *buf, size_t size, uint64_t ms);
/* src with control characters replaced by '?' (names come from the daemon). */
void printable(char *dst, size_t size, const char *src);

struct column {
	const char *title;
	bool right; /* numbers align right */
};

/* Rows of text cells under column titles; zero-initialise with cols/ncols set. */
struct table {
	const struct column *cols;
	size_t ncols;
	char *cells; /* rows * ncols cells of CELL_MAX bytes */
	size_t rows, cap;
};

/* Appends an empty row to fill with table_set(): 0 or -ENOMEM. */
int table_add_row(struct table *t);
/* Sets column col of the last row. */
__attribute__((format(printf, 3, 4)))
void table_set(struct table *t, size_t col, const char *fmt, ...);
/* Prints the titles and the rows, each column as wide as its widest cell. */
void table_print(const struct table *t);
void table_free(struct table *t);
/*
 * The table of n items (size bytes each, from items) under cols, printed:
 * row(t, item, arg) sets the cells of each item's row.  0, or -ENOMEM with
 * nothing printed.
 */
int table_print_items(const struct column *cols, size_t ncols, const void *items, size_t n,
		      size_t size, void (*row)(struct table *t, const void *item, const void *arg),
		      const void *arg);

/* A JSON string; bytes that are not UTF-8 become U+FFFD.  (Not json_string:
 * that is jansson's, which rmemctl links for the cluster command.) */
void json_text(const char *s);
/* "key":value, and a comma when more follows. */
void json_u64(const char *key, uint64_t value, bool more);
/* "key":"value" (json_text), and a comma when more follows. */
void json_str(const char *key, const char *value, bool more);
/* "key":true or false, and a comma when more follows. */
void json_bool(const char *key, bool value, bool more);
/* {"key":[{...},...]} and a newline: members(item) prints each object's
 * members, of the n items of size bytes from items. */
void json_list(const char *key, const void *items, size_t n, size_t size,
	       void (*members)(const void *item));

#endif /* RMEMCTL_OUTPUT_H */
