// SPDX-License-Identifier: MIT
#include "envlabel.h"

#include <string.h>

const char *env_label_pick(const char *environ, size_t len, const char *keys, size_t *ret_len)
{
	const char *k = keys;

	while (k && *k) {
		size_t klen = strcspn(k, ","), pos = 0;

		while (klen && pos < len) {
			const char *e = environ + pos;
			size_t elen = strnlen(e, len - pos);

			if (elen > klen && e[klen] == '=' && !memcmp(e, k, klen)) {
				*ret_len = elen - klen - 1;
				return e + klen + 1;
			}
			pos += elen + 1;
		}
		k += klen;
		if (*k == ',')
			k++;
	}
	return NULL;
}
