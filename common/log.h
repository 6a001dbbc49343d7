/* SPDX-License-Identifier: MIT */
/*
 * Daemon logging. Only executables log; libraries (shm/, the store library)
 * return -errno and let their caller say what failed.
 *
 * Every line is "[MM/DD HH:MM:SS.mmmm] <subsystem>: message" on stderr, the
 * prefix CPA users grep for. The sink is replaceable (tests capture it).
 */
#ifndef CPA_LOG_H
#define CPA_LOG_H

#include <stdarg.h>
#include <stdbool.h>

#include "macro.h"

enum log_level {
	LOG_LVL_ERROR,
	LOG_LVL_WARN,
	LOG_LVL_INFO,
	LOG_LVL_DEBUG,
};

typedef void (*log_sink_fn)(enum log_level lvl, const char *line);

/* Name printed after the timestamp ("capture", "monitor", ...). */
void log_set_subsystem(const char *name);
void log_set_level(enum log_level lvl);
bool log_enabled(enum log_level lvl);
/* NULL restores the default stderr sink. */
void log_set_sink(log_sink_fn fn);

void log_printf(enum log_level lvl, const char *fmt, ...) _printf_(2, 3);

#define log_error(...) log_printf(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...)  log_printf(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...)  log_printf(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...)                                          \
	do {                                                    \
		if (log_enabled(LOG_LVL_DEBUG))                 \
			log_printf(LOG_LVL_DEBUG, __VA_ARGS__); \
	} while (0)

/*
 * Log and return a negative errno in one statement:
 *	return log_error_errno(r, "open '%s': %m", path);
 * %m prints strerror(-r), whatever errno happens to be.
 */
#define log_error_errno(r, ...)                         \
	({                                              \
		int _r = (r);                           \
		errno = _r < 0 ? -_r : _r;              \
		log_printf(LOG_LVL_ERROR, __VA_ARGS__); \
		_r < 0 ? _r : -_r;                      \
	})

#define log_warn_errno(r, ...)                         \
	({                                             \
		int _r = (r);                          \
		errno = _r < 0 ? -_r : _r;             \
		log_printf(LOG_LVL_WARN, __VA_ARGS__); \
		_r < 0 ? _r : -_r;                     \
	})

/* "[MM/DD HH:MM:SS.mmmm] " for the current local time into buf (>= 24 bytes). */
void log_format_stamp(char *buf, unsigned long len);

#endif /* CPA_LOG_H */
