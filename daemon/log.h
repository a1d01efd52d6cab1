/*
 * log.h - rmemd's log: one line per event on stderr, prefixed with the syslog
 * priority as "<N>" so journald files it at the right level, then the function
 * that speaks.  Lines below the configured level are dropped.  A log call
 * leaves errno as it found it.
 */
#ifndef RMEMD_LOG_H
#define RMEMD_LOG_H

#include <syslog.h>

void log_set_level(int level);
int log_get_level(void);

__attribute__((format(printf, 3, 4)))
void log_msg(int prio, const char *func, const char *fmt, ...);

#define log_err(...)    log_msg(LOG_ERR, __func__, __VA_ARGS__)
#define log_warn(...)   log_msg(LOG_WARNING, __func__, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, __func__, __VA_ARGS__)
#define log_info(...)   log_msg(LOG_INFO, __func__, __VA_ARGS__)
#define log_debug(...)  log_msg(LOG_DEBUG, __func__, __VA_ARGS__)

#endif /* RMEMD_LOG_H */
