/* SPDX-License-Identifier: MIT */
/*
 * Small macros shared by every executable: cleanup attributes in the systemd
 * manner, branch hints, alignment. Depends on nothing but libc.
 */
#ifndef CPA_MACRO_H
#define CPA_MACRO_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define ALIGN_UP(x, a)	 (((x) + ((a)-1)) & ~((__typeof__(x))(a)-1))
#define IS_POWER_OF_2(x) ((x) != 0 && (((x) & ((x)-1)) == 0))

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#define _cleanup_(f)   __attribute__((cleanup(f)))
#define _unused_       __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))

static inline void freep(void *p)
{
	free(*(void **)p);
}

static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;

		close(*fd);
		errno = saved;
	}
}

#define _cleanup_free_	_cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* Hand a cleanup-owned value to the caller: the local is reset so cleanup does nothing. */
#define TAKE_PTR(p)                      \
	({                               \
		__typeof__(p) _tp = (p); \
		(p) = NULL;              \
		_tp;                     \
	})

#define TAKE_FD(fd)             \
	({                      \
		int _tf = (fd); \
		(fd) = -1;      \
		_tf;            \
	})

#endif /* CPA_MACRO_H */
