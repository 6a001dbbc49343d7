// SPDX-License-Identifier: MIT
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const char *log_subsystem = "cpa";
static enum log_level log_level = LOG_LVL_INFO;
static log_sink_fn log_sink;

void log_set_subsystem(const char *name)
{
	log_subsystem = name;
}

void log_set_level(enum log_level lvl)
{
	log_level = lvl;
}

bool log_enabled(enum log_level lvl)
{
	return lvl <= log_level;
}

void log_set_sink(log_sink_fn fn)
{
	log_sink = fn;
}

void log_format_stamp(char *buf, unsigned long len)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	snprintf(buf, len, "[%02d/%02d %02d:%02d:%02d.%04ld] ", tm.tm_mon + 1, tm.tm_mday,
		 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 100000);
}

void log_printf(enum log_level lvl, const char *fmt, ...)
{
	static const char *const tags[] = {
		[LOG_LVL_ERROR] = "ERROR: ",
		[LOG_LVL_WARN] = "WARNING: ",
		[LOG_LVL_INFO] = "",
		[LOG_LVL_DEBUG] = "debug: ",
	};
	char line[2048];
	int saved = errno;
	va_list ap;
	int n;

	if (!log_enabled(lvl))
		return;

	log_format_stamp(line, sizeof(line));
	n = (int)strlen(line);
	n += snprintf(line + n, sizeof(line) - (size_t)n, "%s: %s", log_subsystem, tags[lvl]);
	if (n < (int)sizeof(line)) {
		errno = saved; /* for %m */
		va_start(ap, fmt);
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
		va_end(ap);
	}

	if (log_sink) {
		log_sink(lvl, line);
	} else {
		fprintf(stderr, "%s\n", line);
	}
	errno = saved;
}
