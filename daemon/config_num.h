/*
 * config_num.h - the scanner behind rmemd's check for integer literals that
 * libconfig 1.5 would silently truncate to 32 bits (config.c reports them as
 * "FILE:LINE: key: ...").  Pure text scanning: no libconfig, no I/O but
 * reading the file.
 */
#ifndef RMEMD_CONFIG_NUM_H
#define RMEMD_CONFIG_NUM_H

/*
 * The line (from 1) of the first integer literal in text that does not fit
 * in an int and has no L suffix, or 0 when there is none; *literal and
 * *literal_len then say where it is in text.
 */
int config_num_find_truncated(const char *text, const char **literal, int *literal_len);

/* The whole file at path as a NUL-terminated string to free(), or NULL (not
 * readable, or over 16 MiB: not a config file). */
char *config_num_read_text(const char *path);

#endif /* RMEMD_CONFIG_NUM_H */
