// SPDX-License-Identifier: MIT
/*
 * Printable frame names: C++ and Rust demangling through libiberty's
 * cplus_demangle (plain C, static, handles Itanium, Rust legacy and Rust v0),
 * Go package-path shortening (CPA's default).
 */
#include "names.h"

#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

static size_t copy_trunc(const char *s, size_t n, char *buf, size_t cap)
{
	if (cap == 0)
		return 0;
	if (n >= cap) {
		/* Keep the start (namespace, function) and say it was cut. */
		n = cap - 1;
		if (n > 3) {
			memcpy(buf, s, n - 3);
			memcpy(buf + n - 3, "...", 3);
			buf[n] = '\0';
			return n;
		}
	}
	memcpy(buf, s, n);
	buf[n] = '\0';
	return n;
}

const char *symd_basename(const char *path)
{
	const char *s = strrchr(path, '/');

	return s && s[1] ? s + 1 : path;
}

size_t symd_name__go_short(const char *name, char *buf, size_t cap)
{
	size_t limit = strcspn(name, "([");
	const char *cut = NULL, *p;

	/* Only slashes of the package path count: a generic instantiation like
	 * pkg.F[github.com/a/b.T] keeps its type arguments as they are. */
	for (p = name; p < name + limit; p++)
		if (*p == '/')
			cut = p;
	if (cut)
		name = cut + 1;
	return copy_trunc(name, strlen(name), buf, cap);
}

static bool looks_mangled(const char *raw)
{
	/* _Z: Itanium C++ and Rust legacy; _R: Rust v0. */
	return raw[0] == '_' && (raw[1] == 'Z' || raw[1] == 'R');
}

size_t symd_name__format(const char *raw, bool is_go, bool keep_go, char *buf, size_t cap)
{
	const char *at = raw[0] ? strchr(raw + 1, '@') : NULL;
	char unver[SYMD_MAX_NAME + 1];

	/* Symbol versions (pthread_create@@GLIBC_2.34) are not part of the
	 * function's name; static symtabs carry them. */
	if (at && !is_go) {
		size_t n = (size_t)(at - raw);

		if (n >= sizeof(unver))
			n = sizeof(unver) - 1;
		memcpy(unver, raw, n);
		unver[n] = '\0';
		raw = unver;
	}
	if (looks_mangled(raw)) {
		/* No DMGL_PARAMS: a flamegraph frame is a function, overloads merge
		 * and names stay short (docs/symd.md). */
		char *d = cplus_demangle(raw, DMGL_ANSI);

		if (d) {
			size_t n = copy_trunc(d, strlen(d), buf, cap);

			free(d);
			return n;
		}
	}
	if (is_go) {
		size_t n = strlen(raw);

		/* The ELF symbol of a Go assembly function carries its ABI
		 * (runtime.goexit.abi0); Go's own tables and tracebacks, and
		 * so a stripped binary's names (.gopclntab), do not. */
		if (n > 5 && !strcmp(raw + n - 5, ".abi0")) {
			if (n >= sizeof(unver))
				n = sizeof(unver) - 1 + 5;
			memmove(unver, raw, n - 5);
			unver[n - 5] = '\0';
			raw = unver;
		}
		if (!keep_go)
			return symd_name__go_short(raw, buf, cap);
	}
	return copy_trunc(raw, strlen(raw), buf, cap);
}
