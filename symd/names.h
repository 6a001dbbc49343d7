/* SPDX-License-Identifier: MIT */
/*
 * symd: printable frame names (names.c): C++ and Rust demangling, Go
 * package-path shortening, basenames.
 */
#ifndef CPA_SYMD_NAMES_H
#define CPA_SYMD_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#define SYMD_MAX_NAME 1024u /* printed frame name, bytes */

/* Demangle (C++, Rust) and shorten (Go, unless keep_go) raw into buf (NUL
 * terminated, truncated to cap); returns the length. */
size_t symd_name__format(const char *raw, bool is_go, bool keep_go, char *buf, size_t cap);
/* Go: "github.com/x/y/pkg.(*T).M" -> "pkg.(*T).M". */
size_t symd_name__go_short(const char *name, char *buf, size_t cap);
const char *symd_basename(const char *path);

#endif /* CPA_SYMD_NAMES_H */
