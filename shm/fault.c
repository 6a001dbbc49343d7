// SPDX-License-Identifier: MIT
/* The CPA_FAULT_KILL_AFTER_COMMIT test knob; documented in fault.h. */
#include "fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool known_stage(const char *s, size_t len)
{
	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		const char *name = shm_stage_name((enum shm_stage_id)i);

		if (strlen(name) == len && !strncmp(s, name, len))
			return true;
	}
	return false;
}

int shm_fault__kill_after_commit(enum shm_stage_id id, uint32_t generation)
{
	const char *v = getenv(SHM_FAULT_KILL_ENV), *name = shm_stage_name(id);
	size_t len = strlen(name);
	int found = 0;

	if (!v || !*v)
		return 0;
	while (*v) {
		unsigned int n, g;
		int used = 0;
		bool ours = !strncmp(v, name, len) && v[len] == ':';
		const char *p = strchr(v, ':');

		if (!p || !known_stage(v, (size_t)(p - v)) ||
		    sscanf(p, ":%u:%u%n", &n, &g, &used) != 2 || !n || n > 1u << 30)
			return -EINVAL;
		p += used;
		if (*p && (*p != ',' || !p[1]))
			return -EINVAL;
		if (ours && generation <= g)
			found = (int)n;
		v = *p ? p + 1 : p;
	}
	return found;
}
